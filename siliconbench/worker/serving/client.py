"""A streaming completion request to an OpenAI-compatible server, timed per chunk (stdlib http.client only).

Both servers stream one SSE chunk per generated token, except that both hold back a token whose text
ends in an incomplete UTF-8 sequence and send it with the next one, so a chunk can carry two or more
tokens. Token counts therefore never come from chunks when the server says how many it generated:

- ``usage``: the server's usage report (``stream_options.include_usage``; mlx_lm.server sends one);
- ``finish_length``: llama_cpp.server sends no usage report in a stream (it ignores ``stream_options``),
  and it cannot send logprobs without ``--logits_all`` (which changes prefill); its ``finish_reason``
  "length" is set when ``len(completion_tokens) >= max_tokens``, i.e. exactly ``max_tokens`` tokens were
  generated — that is the count;
- ``chunks``: neither (a stream that stopped early without a usage report): the chunk count, a lower
  bound, marked as such in the result (``StreamResult.token_source``), never silently.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise

HOST = "127.0.0.1"

# The sampling parameters both servers get, each set explicitly to "off" (the servers' defaults differ:
# llama_cpp.server top_p 0.95, top_k 40, min_p 0.05, repeat_penalty 1.1; mlx_lm.server 1.0 / 0 / 0 / off).
# At temperature 0 both sample greedily (llama.cpp's greedy sampler, mlx's argmax), so top_p/top_k/min_p
# change nothing; the penalties would (llama.cpp applies repeat_penalty before the greedy pick).
SAMPLING = {
    "temperature": 0.0,  # greedy on both: this, not a seed, is what makes the output deterministic
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "repeat_penalty": 1.0,  # llama_cpp.server's key (default 1.1); 1.0 is off. mlx_lm.server ignores it
    "repetition_penalty": 0.0,  # mlx_lm.server's key (default 0.0, off). llama_cpp.server ignores it
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,  # both servers' keys, both default off
}


@dataclass
class StreamResult:
    t_sent: float
    max_tokens: int | None = None
    ok: bool = False
    error: str | None = None
    token_times: list[float] = field(default_factory=list)  # perf_counter time of each token chunk
    t_end: float | None = None
    usage_tokens: int | None = None
    finish_reason: str | None = None

    @property
    def token_source(self) -> str:
        """Where n_tokens comes from: 'usage', 'finish_length' or 'chunks' (see the module docstring)."""
        if self.usage_tokens is not None:
            return "usage"
        if self.finish_reason == "length" and self.max_tokens:
            return "finish_length"
        return "chunks"

    @property
    def n_tokens(self) -> int:
        source = self.token_source
        if source == "usage":
            return self.usage_tokens
        if source == "finish_length":
            return self.max_tokens
        return len(self.token_times)

    @property
    def ttft_s(self) -> float | None:
        return self.token_times[0] - self.t_sent if self.token_times else None

    def gaps_s(self) -> list[float]:
        t = self.token_times
        return [b - a for a, b in pairwise(t)]


def completion_body(prompt: str, max_tokens: int, banned: set[int]) -> dict:
    """The one request body both servers get, byte for byte: greedy, exactly max_tokens, no penalties.

    - No ``seed``: mlx_lm.server batches only requests without one (with it, concurrent clients are served one
      at a time). Determinism comes from temperature 0, i.e. greedy decoding, on both servers.
    - Sampling parameters all explicit and off (``SAMPLING``): each server reads its own keys and ignores
      the other's, so one body serves both.
    - EOS and the other special tokens banned by logit bias, as the in-process runs ignore EOS, so that
      exactly max_tokens come out. Neither server has a native ignore-EOS: llama_cpp.server's ``min_tokens``
      bans only ``token_eos()`` and is applied in Python per token too, and mlx_lm.server has no such key.
      mlx_lm.server applies logit_bias as an MLX op; llama_cpp.server in Python per token (a copy of the
      logits and a custom sampler), a cost that grows with the vocabulary and is part of its figures.
    Both costs, measured: docs/evidence/house-fifth-floor-2026-12-06/figures-moved-from-code.md.
    - Token counts from the usage report (``stream_options.include_usage``) where the server sends one.
    """
    return {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": True,
        **SAMPLING,
        "logit_bias": {str(t): -100.0 for t in sorted(banned)},
        "stream_options": {"include_usage": True},
    }


def request_facts(body: dict) -> dict:
    """What the result records of the requests: every key but the prompt or messages (the same for both servers)."""
    return {k: v for k, v in body.items() if k not in ("prompt", "messages")}


def post_json(conn: http.client.HTTPConnection, path: str, payload: bytes) -> http.client.HTTPResponse:
    """POST a JSON ``payload`` (encoded before the clock starts) on ``conn``; the response, its body unread."""
    conn.request(
        "POST", path, body=payload, headers={"Content-Type": "application/json", "Content-Length": str(len(payload))}
    )
    return conn.getresponse()


def answers_completion(port: int, timeout_s: float) -> bool:
    """One non-streaming 1-token completion; True on HTTP 200 with a completion. Never raises."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout_s)
    try:
        probe = {"prompt": "ready", "max_tokens": 1, "stream": False, **SAMPLING}
        resp = post_json(conn, "/v1/completions", json.dumps(probe).encode())
        data = resp.read()
        return resp.status == 200 and bool(json.loads(data).get("choices"))
    except (OSError, http.client.HTTPException, ValueError):
        return False
    finally:
        conn.close()


DONE = b"[DONE]"


def sse_data(resp: http.client.HTTPResponse, deadline: float) -> Iterator[tuple[float, bytes]]:
    """(perf_counter time it was read, payload) of each server-sent ``data:`` line, [DONE] included, until the stream
    ends; keep-alive comments and blank separators skipped. Raises TimeoutError past ``deadline``: the socket's own
    timeout bounds one read only, and a server streaming fast chunks never trips it (vLLM's timeout is the total)."""
    while True:
        line = resp.readline()
        if not line:
            return
        now = time.perf_counter()
        if now > deadline:
            raise TimeoutError("the request timed out: no [DONE] within request_timeout_s, its total time")
        line = line.strip()
        if line.startswith(b"data:"):
            yield now, line[5:].strip()


def stream_completion(port: int, body: dict, timeout_s: float) -> StreamResult:
    """POST /v1/completions and read the stream to its end; never raises for a failed request."""
    payload = json.dumps(body).encode()
    res = StreamResult(t_sent=time.perf_counter(), max_tokens=body.get("max_tokens"))
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout_s)
    try:
        resp = post_json(conn, "/v1/completions", payload)
        if resp.status != 200:
            res.error = f"HTTP {resp.status}: {resp.read(300).decode(errors='replace')}"
            return res
        done = False
        for now, data in sse_data(resp, res.t_sent + timeout_s):
            if data == DONE:
                done = True
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                res.usage_tokens = int(chunk["usage"].get("completion_tokens", 0))
            choices = chunk.get("choices") or []
            if not choices:
                continue
            if choices[0].get("finish_reason") is None:
                res.token_times.append(now)
            else:  # the closing chunk: mlx_lm sends any held-back text before it, llama_cpp sends ""
                res.finish_reason = choices[0]["finish_reason"]
                if choices[0].get("text"):
                    res.token_times.append(now)
        res.t_end = time.perf_counter()
        if not done:
            res.error = "the stream ended without [DONE]"
        elif not res.token_times:
            res.error = "no token was streamed"
        else:
            res.ok = True
    except (OSError, http.client.HTTPException, json.JSONDecodeError, ValueError) as exc:
        res.error = f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return res


def chat_body(messages: list[dict], max_tokens: int, banned: set[int]) -> dict:
    """``completion_body``'s request for /v1/chat/completions: the same sampling, limits and banned tokens, with
    ``messages`` in place of the prompt (each server applies the model's chat template)."""
    body = completion_body("", max_tokens, banned)
    del body["prompt"]
    return {"messages": messages, **body}


@dataclass
class ServedRequest:
    """One request of a serving run, as vLLM's request function records it (text-carrying chunks only)."""

    t_sent: float
    ok: bool = False
    error: str | None = None
    chunk_times: list[float] = field(default_factory=list)  # arrival of each chunk carrying text
    t_last: float | None = None  # the last data chunk (the usage report, where one comes after the text)
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    token_source: str = "usage"
    # the server's own account of the request, where it gives one (llama-server's `timings`: prompt_ms, predicted_ms)
    server_prompt_ms: float | None = None
    server_decode_ms: float | None = None

    @property
    def ttft_s(self) -> float | None:
        return self.chunk_times[0] - self.t_sent if self.chunk_times else None

    @property
    def e2el_s(self) -> float | None:
        return self.t_last - self.t_sent if self.t_last is not None else None

    def itls_s(self) -> list[float]:
        t = self.chunk_times
        return [b - a for a, b in pairwise(t)]


def _chunk_text(choice: dict) -> str:
    delta = choice.get("delta")
    if isinstance(delta, dict):  # chat: a role-only first delta carries no text
        return delta.get("content") or ""
    return choice.get("text") or ""


def stream_request(port: int, path: str, body: dict, timeout_s: float) -> ServedRequest:
    """POST ``body`` to ``path`` (/v1/chat/completions or /v1/completions), read the stream to [DONE]; never raises
    for a failed request (the server's message is kept as the error)."""
    payload = json.dumps(body).encode()
    res = ServedRequest(t_sent=time.perf_counter())
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout_s)
    try:
        resp = post_json(conn, path, payload)
        if resp.status != 200:
            res.error = f"HTTP {resp.status}: {resp.read(400).decode(errors='replace')}"
            return res
        done = False
        for now, data in sse_data(resp, res.t_sent + timeout_s):
            if data == DONE:
                done = True
                break
            chunk = json.loads(data)
            res.t_last = now
            if chunk.get("error"):
                res.error = f"server error mid-stream: {json.dumps(chunk['error'])[:300]}"
            usage = chunk.get("usage")
            if usage:
                res.prompt_tokens = usage.get("prompt_tokens")
                res.output_tokens = usage.get("completion_tokens")
                details = usage.get("prompt_tokens_details") or {}
                if details.get("cached_tokens") is not None:
                    res.cached_tokens = details["cached_tokens"]
            own = chunk.get("timings")
            if isinstance(own, dict):
                res.server_prompt_ms = own.get("prompt_ms")
                res.server_decode_ms = own.get("predicted_ms")
                if res.cached_tokens is None and own.get("cache_n") is not None:
                    res.cached_tokens = own["cache_n"]
            for choice in chunk.get("choices") or []:
                if _chunk_text(choice):
                    res.chunk_times.append(now)
                if choice.get("finish_reason"):
                    res.finish_reason = choice["finish_reason"]
        if res.error:
            pass  # the server's own message, kept
        elif not done:
            res.error = "the stream ended without [DONE]"
        elif not res.chunk_times:
            res.error = "no text was streamed"
        elif res.output_tokens is not None:
            res.ok = True
        elif res.finish_reason == "length":  # llama_cpp.server sends no usage in a stream: see the module docstring
            res.output_tokens, res.token_source, res.ok = body.get("max_tokens"), "finish_length", True
        else:
            res.error = "the server sent no usage report (stream_options.include_usage): no token count"
    except Exception as exc:  # a malformed chunk as much as a dropped connection: this request failed, and says why
        res.ok, res.error = False, f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return res
