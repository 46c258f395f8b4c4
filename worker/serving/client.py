"""A streaming completion request to an OpenAI-compatible server, timed per chunk (stdlib http.client only).

Both servers stream one SSE chunk per generated token (mlx_lm holds back a chunk while the text is an
incomplete UTF-8 sequence, so a chunk can carry two tokens); token counts come from the server's
usage report where it sends one, else from the chunks.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass, field

HOST = "127.0.0.1"


@dataclass
class StreamResult:
    t_sent: float
    ok: bool = False
    error: str | None = None
    token_times: list[float] = field(default_factory=list)  # perf_counter time of each token chunk
    t_end: float | None = None
    usage_tokens: int | None = None

    @property
    def n_tokens(self) -> int:
        return self.usage_tokens if self.usage_tokens is not None else len(self.token_times)

    @property
    def ttft_s(self) -> float | None:
        return self.token_times[0] - self.t_sent if self.token_times else None

    def gaps_s(self) -> list[float]:
        t = self.token_times
        return [b - a for a, b in zip(t, t[1:])]


def completion_body(prompt: str, max_tokens: int, banned: set[int]) -> dict:
    """The one request body both servers get: greedy, exactly max_tokens, no penalties.

    - No ``seed``: mlx_lm.server batches only requests without one (with it, three clients were served one
      at a time); determinism comes from temperature 0, i.e. greedy decoding.
    - Repetition penalties off on both: llama_cpp.server's ``repeat_penalty`` defaults to 1.1 (1.0 is off);
      mlx_lm.server reads ``repetition_penalty`` and defaults it to off (0). Each server ignores the other's key.
    - Special tokens (EOS) banned by logit bias, as the in-process runs ignore EOS.
    - Token counts come from the usage report (``stream_options.include_usage``), not from chunks.
    """
    return {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
            "repeat_penalty": 1.0, "repetition_penalty": 0.0,
            "logit_bias": {str(t): -100.0 for t in sorted(banned)}, "stream_options": {"include_usage": True}}


def stream_completion(port: int, body: dict, timeout_s: float) -> StreamResult:
    """POST /v1/completions and read the stream to its end; never raises for a failed request."""
    payload = json.dumps(body).encode()
    res = StreamResult(t_sent=time.perf_counter())
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout_s)
    try:
        conn.request("POST", "/v1/completions", body=payload,
                     headers={"Content-Type": "application/json", "Content-Length": str(len(payload))})
        resp = conn.getresponse()
        if resp.status != 200:
            res.error = f"HTTP {resp.status}: {resp.read(300).decode(errors='replace')}"
            return res
        done = False
        while not done:
            line = resp.readline()
            if not line:
                break
            now = time.perf_counter()
            line = line.strip()
            if not line.startswith(b"data:"):
                continue  # keep-alive comments, blank separators
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                res.usage_tokens = int(chunk["usage"].get("completion_tokens", 0))
            choices = chunk.get("choices") or []
            if choices and choices[0].get("finish_reason") is None:
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
