"""serve: requests from the user's prompts sent to the engine's OpenAI-compatible server at a request rate, judged as
vLLM's ``bench serve`` judges them (TTFT, TPOT, ITL, E2EL, throughput, goodput under objectives), one job per rate.
Run by siliconbench/worker/workloads/serve.py; the prompt file is read by prompt_files.py."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from ..engines import describe
from ..errors import UserError
from .base import SERVER_FACTS, Config, ServerSettings, Strict, fits, server_engine_params, server_params
from .prompt_files import PromptFormat, read_prompt_file, turns

LABEL = (
    "request_rate",
    "max_concurrency",
    "server",
    "slots",
)  # the params a job's one-line label shows (JobSpec.label)
FACTS = SERVER_FACTS | {
    "ready_s",
    "stop_s",
    "clean_stop",
    "memory_interval_ms",
    "hwm_supported",
    "batching",
    "prompts",
    "endpoint",
    "runs",
    "context_check",
    "chat_template",
    "client_behind",
}

Rate = PositiveFloat | Literal["inf"]


class Objectives(Strict):
    """Service-level objectives a request must meet, all of them, to count towards goodput (vLLM --goodput)."""

    ttft_ms: PositiveFloat | None = Field(None, description="Time to first token at most this")
    tpot_ms: PositiveFloat | None = Field(None, description="Time per output token (first excluded) at most this")
    e2el_ms: PositiveFloat | None = Field(None, description="End-to-end latency at most this")

    @model_validator(mode="after")
    def _some(self) -> Objectives:
        if self.ttft_ms is None and self.tpot_ms is None and self.e2el_ms is None:
            raise ValueError("name at least one objective: ttft_ms, tpot_ms or e2el_ms")
        return self


class ServeWorkload(ServerSettings):
    """Requests from your prompts at request rates against the engine's server, as vLLM's `bench serve`."""

    kind: Literal["serve"] = "serve"
    prompts: str = Field(
        "corpus",
        description="'corpus': prompts of prompt_tokens tokens cut from the shipped text; or your prompt file (a path; "
        "in a sweep file, relative to it): JSONL of OpenAI chat `messages`, ShareGPT conversations (JSON array or "
        "JSONL), or plain text one prompt a line, of any size. Its sha256 is part of the job's identity; up to 16 MiB "
        "its content travels with each job, a larger one (a dataset such as ShareGPT_V3) is stored once by digest "
        "where the workers read it.",
    )
    prompt_format: PromptFormat = Field("auto", description="auto: by extension (.jsonl, .json, else text)")
    endpoint: Literal["chat", "completions"] = Field(
        "chat",
        description="chat: /v1/chat/completions, each server applying the model's own chat template (a model without "
        "one is refused); completions: /v1/completions with the raw text (text prompts and the corpus only)",
    )
    prompt_tokens: PositiveInt = Field(128, description="Tokens of each corpus prompt (prompts: corpus only)")
    request_rate: Annotated[list[Rate], Field(min_length=1)] = Field(
        ["inf"],
        description="Requests per second, one job each: Poisson arrivals seeded by the sweep's seed (the gaps scaled "
        "so that num_requests take num_requests / rate seconds, as vLLM does); 'inf' sends all at once",
    )
    max_concurrency: PositiveInt | Annotated[list[PositiveInt], Field(min_length=1)] | None = Field(
        None,
        description="At most this many requests in flight (client side); a list is a concurrency sweep, one job "
        "each (with the default request_rate 'inf', a closed loop: each request sent as soon as one ends, GuideLLM's "
        "concurrent mode), drawn by the Serving page as throughput against TTFT and TPOT p99",
    )
    num_requests: PositiveInt = Field(32, description="Requests per run (multi_turn: conversations per run)")
    warmup_requests: Annotated[int, Field(ge=0)] = Field(2, description="Sent one by one before each job's runs")
    max_tokens: PositiveInt = Field(64, description="Output tokens asked of each request")
    ignore_eos: bool = Field(
        True,
        description="Ban EOS and the other special tokens (logit_bias), so every request generates max_tokens "
        "(vLLM --ignore-eos); false lets answers end where the model ends them",
    )
    multi_turn: bool = Field(
        False,
        description="Replay each conversation turn by turn (its recorded answers as history), so the servers' prompt "
        "caches matter; arrivals are then of conversations",
    )
    sharegpt: Literal["first_turn", "history"] = Field(
        "first_turn",
        description="A ShareGPT file, single-turn: 'first_turn' sends what vLLM's bench serve sends — each "
        "conversation's first turn, asking as many output tokens as its first reply has (an explicit max_tokens fixes "
        "them instead, as --sharegpt-output-len), leaving out what vLLM leaves out (fewer than two turns, under 4 "
        "tokens, a prompt over 1,024, over 2,048 together); 'history' sends everything up to the last user turn with "
        "max_tokens. multi_turn replays every turn either way.",
    )
    slo: Objectives | None = Field(None, description="Objectives for goodput, e.g. {ttft_ms: 500, tpot_ms: 50}")
    slots: PositiveInt = Field(4, description="llama-server's parallel slots (--parallel); other servers ignore it")
    context_tokens: PositiveInt | None = Field(
        None, description="Context per request (llama-server: per slot); default the model's, at most 4,096"
    )
    memory_interval_ms: PositiveInt = Field(10, description="How often the server tree's RSS is sampled")
    request_timeout_s: PositiveFloat = Field(
        300.0, description="A request's total time, from send to [DONE], after which it counts as failed"
    )


def concurrencies(w: ServeWorkload) -> list[int | None]:
    c = w.max_concurrency
    return c if isinstance(c, list) else [c]


def n_configs(w: ServeWorkload) -> int:
    return len(w.request_rate) * len(concurrencies(w))


def rate_param(rate: float | str) -> float | str:
    return "inf" if rate == "inf" or math.isinf(float(rate)) else float(rate)


def configs(w: ServeWorkload, at: str, m, catalog, engines: list[str]) -> list[Config]:
    context = w.context_tokens or min(m.n_ctx, 4096)
    fits(context, m, f"{at}.context_tokens", "context_tokens")
    params = {
        **server_params(w),
        "prompts": w.prompts,
        "prompt_format": "corpus",
        "endpoint": w.endpoint,
        "num_requests": w.num_requests,
        "warmup_requests": w.warmup_requests,
        "ignore_eos": w.ignore_eos,
        "multi_turn": w.multi_turn,
        "slo": w.slo.model_dump(exclude_none=True) if w.slo else None,
        "slots": w.slots,
        "context_tokens": context,
        "memory_interval_ms": w.memory_interval_ms,
        "request_timeout_s": w.request_timeout_s,
    }
    if w.prompts == "corpus":
        fits(w.prompt_tokens + w.max_tokens, m, f"{at}.prompt_tokens", "prompt_tokens + max_tokens")
        if w.prompt_tokens + w.max_tokens > context:
            raise UserError(
                f"{at}.prompt_tokens",
                f"prompt_tokens + max_tokens = {w.prompt_tokens + w.max_tokens} exceeds context_tokens = {context}.",
            )
        if w.multi_turn:
            raise UserError(
                f"{at}.multi_turn", "the corpus has no conversations: give a prompt file with several turns."
            )
        n_prompt = w.prompt_tokens
    else:
        file, fmt, convs = read_prompt_file(w.prompts, w.prompt_format, f"{at}.prompts")
        _check_endpoint(w, fmt, convs, at)
        params.update(prompts=file.digest, prompt_format=fmt)
        if file.travels_inline:
            params["prompts_body"] = convs
        else:  # a dataset: the job names it by digest and by where it was read (JobSpec.files), not by its body
            params.update(prompts_units=len(convs), prompts_file=str(file.path))
        if fmt == "sharegpt" and not w.multi_turn and w.sharegpt == "first_turn":
            _check_first_turns(convs, w, at)
            # vLLM's sampling: a job of its own identity (history-mode jobs keep theirs, without these keys)
            params.update(sharegpt="first_turn", output_from_reply="max_tokens" not in w.model_fields_set)
        n_prompt = 0  # each request's prompt tokens are the server's count (usage.prompt_tokens)
    return [
        Config(n_prompt, w.max_tokens, {**params, "max_concurrency": c, "request_rate": rate_param(r)}, warmup=0)
        for r in w.request_rate
        for c in concurrencies(w)
    ]


def least_duration_s(job) -> tuple[float | None, str]:
    """A run's arrivals span num_requests / rate seconds (the last is sent then), every repetition."""
    rate = job.params["request_rate"]
    if rate == "inf":
        return None, "request_rate"
    return job.repetitions * job.params["num_requests"] / float(rate), "request_rate"


def _check_first_turns(convs: list, w: ServeWorkload, at: str) -> None:
    """vLLM sends a conversation's first turn and takes its reply's length: a file where none has both is refused."""
    if not any(len(c) >= 2 for c in convs):
        raise UserError(
            f"{at}.prompts",
            f"no conversation in {w.prompts} has a reply after its first turn, which vLLM's ShareGPT sampling needs "
            "(sharegpt: first_turn); set `sharegpt: history` to send each as it is.",
        )


def _check_endpoint(w: ServeWorkload, fmt: str, convs: list, at: str) -> None:
    if w.endpoint == "completions" and (fmt != "text" or w.multi_turn):
        raise UserError(
            f"{at}.endpoint",
            f"endpoint completions sends raw text, but {w.prompts} holds {fmt} conversations whose roles only a "
            "chat template can join: use endpoint chat, or a text file (one prompt a line).",
        )
    if w.multi_turn and not any(len(turns(c)) > 1 for c in convs):
        raise UserError(
            f"{at}.multi_turn", f"no conversation in {w.prompts} has more than one user turn: nothing to replay."
        )


def engine_params(w: ServeWorkload, at: str, cfg: Config, engine: str, model: str, art, catalog, full=None, engines=()):
    """Which server runs; slots only where it is llama-server (the others have none, so they stay one job)."""
    params = server_engine_params(w, at, cfg, engine, model, art, catalog)
    server = params.get("server") or describe(engine).unnamed_server
    if server == "llama_cpp.server" and not w.ignore_eos:
        # it streams no usage report: a count comes only from finish_reason "length", so every answer that ends on
        # EOS would be a failed request
        raise UserError(
            f"{at}.ignore_eos",
            "llama_cpp.server sends no token count in a stream, so an answer that ends on EOS cannot be counted: keep "
            "ignore_eos true, or use server: llama-server.",
        )
    if server != "llama-server":
        params = {k: v for k, v in params.items() if k != "slots"}
    return params


def sent_units(job) -> int:
    """Units the job's runs send: num_requests a run, every repetition (warm-up ones too)."""
    return job.params["num_requests"] * (job.repetitions + job.warmup)


def units_needed(job) -> tuple[int, int] | None:
    """(units the prompt file holds, units the job's runs send), or None for the corpus (never repeats)."""
    convs = job.params.get("prompts_body")
    held = len(convs) if convs is not None else job.params.get("prompts_units")
    if held is None:
        return None
    return held, sent_units(job)


def check_job(job, at: str) -> None:
    """A multi-turn run that would resend a conversation replays it from the server's cache: not the run asked."""
    have = units_needed(job)
    if job.params.get("multi_turn") and have and have[1] > have[0]:
        raise UserError(
            f"{at}.num_requests",
            f"the prompt file holds {have[0]} conversations, but num_requests x repetitions = {have[1]}: a multi-turn "
            "run would replay a conversation the server has cached. Give more conversations or ask for fewer.",
        )


def notice(job) -> str | None:
    """A prompt file shorter than the runs: later runs resend earlier prompts, which a prompt cache may serve."""
    have = units_needed(job)
    if not have or have[1] <= have[0]:
        return None
    return (
        f"serve {job.model} ({job.params['prompts'][:19]}…): the prompt file holds {have[0]} prompts and the runs "
        f"send {have[1]}, so {have[1] - have[0]} are repeats a server's prompt cache may serve; the result shows how "
        "much it reused (serve_prompt_reuse_pct, extra.prompts.repeated). Give more prompts to avoid it."
    )
