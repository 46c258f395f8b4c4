"""A user's prompt file for the serve workload, read into conversations before anything runs.

Three formats, as the serving benchmarks take them (vLLM ``bench serve``'s custom and ShareGPT datasets,
mlx-lm's ``--prompt-file``):

- ``chat``: JSONL, one OpenAI chat request a line: ``{"messages": [{"role": "user", "content": "..."}, ...]}``;
- ``sharegpt``: ShareGPT conversations, a JSON array or JSONL of ``{"conversations": [{"from": "human",
  "value": "..."}, {"from": "gpt", ...}]}``;
- ``text``: plain text, one prompt a line (blank lines skipped).

``auto`` picks by extension: ``.jsonl`` as chat or ShareGPT by each line's key, ``.json`` as a ShareGPT array,
anything else as text. Every problem names the file's line (or the array's entry) and what is wrong, so
a malformed file is refused before a server starts. A conversation is a list of ``{"role", "content"}``
messages with at least one user turn; the system turn, where present, comes first.
"""

from __future__ import annotations

import json
from typing import Literal

from ..errors import UserError
from .base import UserFile, read_user_file

PromptFormat = Literal["auto", "chat", "sharegpt", "text"]
ROLES = ("system", "user", "assistant")
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}

Conversation = list[dict]


def read_prompt_file(path: str, fmt: PromptFormat, where: str) -> tuple[UserFile, str, list[Conversation]]:
    """(the file, the format read, its conversations), of any size; UserError naming ``where`` and the line."""
    file = read_user_file(path, where, "a prompt file (JSONL, JSON, text)", limit=None)
    p, body = file.path, file.text
    if fmt == "auto":
        fmt = {".jsonl": "chat", ".json": "sharegpt"}.get(p.suffix.lower(), "text")
        if fmt == "chat" and _first_line_key(body) == "conversations":
            fmt = "sharegpt"
    if fmt == "text":
        convs = [[{"role": "user", "content": line}] for line in body.splitlines() if line.strip()]
    elif fmt == "sharegpt" and body.lstrip().startswith("["):
        convs = _sharegpt_array(body, path, where)
    else:
        convs = _jsonl(body, path, where, fmt)
    if not convs:
        raise UserError(where, f"{path} holds no prompt.")
    return file, fmt, convs


def _first_line_key(body: str) -> str | None:
    """'conversations' where the first line is a ShareGPT record (the rest are then read as ShareGPT too)."""
    for line in body.splitlines():
        if line.strip():
            try:
                obj = json.loads(line)
            except ValueError:
                return None  # reported with its line number by _jsonl
            return "conversations" if isinstance(obj, dict) and "conversations" in obj else None
    return None


def _jsonl(body: str, path: str, where: str, fmt: str) -> list[Conversation]:
    out = []
    for n, line in enumerate(body.splitlines(), start=1):
        if not line.strip():
            continue
        at = f"{path} line {n}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise UserError(where, f"{at} is not JSON ({exc.msg} at column {exc.colno}): {line[:80]!r}.") from None
        if not isinstance(obj, dict):
            key = "messages" if fmt == "chat" else "conversations"
            raise UserError(where, f"{at} is a JSON {type(obj).__name__}, not an object with '{key}'.")
        if fmt == "chat":
            out.append(_messages(obj.get("messages"), at, where))
        else:
            out.append(_sharegpt(obj, at, where))
    return out


def _sharegpt_array(body: str, path: str, where: str) -> list[Conversation]:
    try:
        items = json.loads(body)
    except ValueError as exc:
        raise UserError(where, f"{path} line {exc.lineno} is not JSON ({exc.msg} at column {exc.colno}).") from None
    if not isinstance(items, list):
        raise UserError(where, f"{path} is not a JSON array of ShareGPT conversations.")
    return [_sharegpt(obj, f"{path} entry {i}", where) for i, obj in enumerate(items)]


def _sharegpt(obj: object, at: str, where: str) -> Conversation:
    turns = obj.get("conversations") if isinstance(obj, dict) else None
    if not isinstance(turns, list):
        raise UserError(where, f"{at} has no 'conversations' list (ShareGPT: [{{'from': 'human', 'value': ...}}]).")
    messages = []
    for i, t in enumerate(turns):
        role = SHAREGPT_ROLES.get(t.get("from")) if isinstance(t, dict) else None
        if role is None or not isinstance(t.get("value"), str):
            raise UserError(
                where,
                f"{at} turn {i}: expected {{'from': one of {', '.join(SHAREGPT_ROLES)}, 'value': text}}, got {t!r:.80}.",
            )
        messages.append({"role": role, "content": t["value"]})
    return _checked(messages, at, where)


def _messages(messages: object, at: str, where: str) -> Conversation:
    if not isinstance(messages, list) or not messages:
        raise UserError(where, f"{at} has no 'messages' list (OpenAI chat: [{{'role': 'user', 'content': ...}}]).")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise UserError(
                where,
                f"{at} message {i}: expected {{'role': one of {', '.join(ROLES)}, 'content': text}}, got {m!r:.80}.",
            )
        out.append({"role": m["role"], "content": m["content"]})
    return _checked(out, at, where)


def _checked(messages: Conversation, at: str, where: str) -> Conversation:
    if not any(m["role"] == "user" for m in messages):
        raise UserError(where, f"{at} has no user turn: there is nothing to ask the server.")
    if any(m["role"] == "system" for m in messages[1:]):
        raise UserError(where, f"{at}: a system message may only come first.")
    return messages


def turns(conversation: Conversation) -> list[Conversation]:
    """The requests replaying ``conversation`` turn by turn: for each user turn, every message before it (the
    recorded assistant answers included, so both servers see the same history) and the turn itself."""
    return [conversation[: i + 1] for i, m in enumerate(conversation) if m["role"] == "user"]


def single_request(conversation: Conversation) -> Conversation:
    """One request of a conversation: everything up to and including its last user turn."""
    return turns(conversation)[-1]
