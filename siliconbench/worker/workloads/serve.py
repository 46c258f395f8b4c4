"""The serve workload: the user's prompts sent to the engine's own server at a request rate, as vLLM's ``bench serve``.

Before the server starts: the chat template is checked (chat needs the model's own), every prompt's content tokens
are counted against the context (a chat template's own tokens are only known to the server: a prompt they push over
is that request's error, with the server's message), and the requests of every run are made. Then, per repetition,
one run: ``num_requests`` units (a request, or with multi_turn a conversation's turns in order) sent at seeded Poisson
arrivals (siliconbench/worker/serving/load.py), the server tree's memory sampled meanwhile. A different slice of the prompts for
each run, so one run's cached prompts do not serve the next — while the prompts last: a source with fewer units than
the runs send repeats them (warned at expansion, recorded as extra.prompts.repeated, its reuse in
serve_prompt_reuse_pct). Failures fail: a warm-up request that fails, a run whose every request failed, or a server
that dies mid-run fails the job with the first error (or the server's log); a request that raises anything is a
failed request. Each run records how late the client sent against its schedule (extra.runs[].client_behind).
"""

from __future__ import annotations

import contextlib

from siliconbench.contract.errors import WorkloadError
from siliconbench.contract.workloads.prompt_files import read_prompt_file, single_request, turns
from siliconbench.contract.workloads.serve import sent_units

from siliconbench.worker.measure.memory import TreeWindow
from siliconbench.worker.serving.client import chat_body, completion_body, request_facts, stream_request
from siliconbench.worker.serving.energy import EnergyTrace, steady_energy
from siliconbench.worker.serving.load import arrivals, client_lag, drive, figures
from siliconbench.worker.serving.process import Server, ServerError, free_port
from siliconbench.worker.serving.servers import batching, command, has_slots, server_facts
from siliconbench.worker.serving.sharegpt import Ask, first_turns
from siliconbench.worker.workloads.common import (
    Context,
    Outcome,
    Prompts,
    SampleLog,
    done,
    engine_for,
    repetitions,
    vocab_engine,
)

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
WARMUP_PROMPT = "Say hello."  # no prompt of the runs: warm-up leaves nothing in a cache the runs could reuse
ERRORS_KEPT = 5


def conversations(ctx: Context, vocab) -> list[list[dict]]:
    """The prompt source as conversations: the job's own (a prompt file), or corpus prompts of n_prompt tokens."""
    p = ctx.job.params
    if "prompts_body" in p:
        return p["prompts_body"]
    if "prompts_file" in ctx.job.files:  # a dataset: made local by digest before this process started
        file, _fmt, convs = read_prompt_file(ctx.job.files["prompts_file"], p["prompt_format"], "prompts")
        if file.digest != p["prompts"]:
            raise WorkloadError(f"{file.path} holds {file.digest}, not the job's {p['prompts']}")
        return convs
    prompts = Prompts(vocab, ctx.job.n_prompt, ctx.job.seed)
    return [[{"role": "user", "content": prompts.text(i)}] for i in range(sent_units(ctx.job))]


def units_of(ctx: Context, convs: list[list[dict]], vocab) -> tuple[list[list[Ask]], dict]:
    """Each unit of work as its requests: one request per conversation (its history up to the last user turn, or with
    params.sharegpt first_turn what vLLM sends: siliconbench/worker/serving/sharegpt.py), or every turn of it; and
    what the sampling left out."""
    p, n_gen = ctx.job.params, ctx.job.n_gen
    if p.get("sharegpt") == "first_turn":
        fixed = None if p.get("output_from_reply") else n_gen
        sampled = first_turns(convs, vocab.tokenize, fixed, limit=sent_units(ctx.job))
        if not sampled.asks:
            raise WorkloadError(
                f"no conversation of the prompt file is one vLLM would send ({sampled.facts()['left_out']}): give "
                "conversations of a human turn and its reply, or set `sharegpt: history`"
            )
        return [[a] for a in sampled.asks], sampled.facts()
    if p["multi_turn"]:
        return [[Ask(m, n_gen) for m in turns(c)] for c in convs], {}
    return [[Ask(single_request(c), n_gen)] for c in convs], {}


def check_context(units: list[list[Ask]], vocab, context: int, endpoint: str) -> dict:
    """Refuse, before the server starts, a request whose content alone leaves no room for its max_tokens."""
    counts: dict[str, int] = {}  # by content: multi-turn repeats every earlier message in each later turn
    longest = 0
    for i, unit in enumerate(units):
        for ask in unit:
            for m in ask.messages:
                if m["content"] not in counts:
                    counts[m["content"]] = len(vocab.tokenize(m["content"]))
            n = sum(counts[m["content"]] for m in ask.messages)
            if n + ask.max_tokens > context:
                raise WorkloadError(
                    f"request {i} (conversation {i} of the prompts) has {n:,} tokens of content, and with "
                    f"max_tokens={ask.max_tokens} exceeds the context of {context:,} tokens (context_tokens): shorten "
                    "it, or raise context_tokens"
                )
            longest = max(longest, n)
    return {
        "context_tokens": context,
        "longest_content_tokens": longest,
        "checked": "each request's message contents, tokenized before the run; the chat template's own tokens are "
        "counted by the server only (a request they push over the context fails with the server's message)"
        if endpoint == "chat"
        else "each request's text, tokenized before the run",
    }


def body_of(messages: list[dict], endpoint: str, max_tokens: int, banned: set[int]) -> dict:
    if endpoint == "chat":
        return chat_body(messages, max_tokens, banned)
    return completion_body(messages[-1]["content"], max_tokens, banned)


def run(ctx: Context) -> Outcome:
    job, p = ctx.job, ctx.job.params
    endpoint, path = p["endpoint"], PATHS[p["endpoint"]]
    vocab = vocab_engine(ctx)
    template = vocab.chat_template()
    if endpoint == "chat" and template is None:
        raise WorkloadError(
            f"model {job.model!r} ({job.quant}) has no chat template, so each server would join the messages its own "
            "way: set `endpoint: completions` in the workload to send raw text (/v1/completions) instead"
        )
    banned = vocab.special_token_ids() if p["ignore_eos"] else set()
    units, sampled = units_of(ctx, conversations(ctx, vocab), vocab)
    # only what the runs send is checked (a dataset holds far more than a run's requests)
    context_check = check_context(units[: sent_units(job)], vocab, p["context_tokens"], endpoint)
    n, slots = p["num_requests"], p.get("slots", 1)
    port = p["port"] or free_port()
    cmd = command(job, ctx.artifact, port, p["context_tokens"], slots=slots)
    server = Server(job.engine, cmd, port, ctx.workdir / "server.log", on_spawn=ctx.spawned)
    log, runs, hwm_ok = SampleLog(), [], True
    # as many requests as the server runs at once: its batch, within the client's own limit and the run's size
    in_flight = min(p["max_concurrency"] or n, n)
    served = batching(job, slots if has_slots(job) else in_flight)
    capacity = min(served.get("max_batch") or 1, in_flight)
    needed = sent_units(job)

    def send(body: dict):
        return stream_request(port, path, body, p["request_timeout_s"])

    try:
        server.start()
        ready_s = server.wait_ready(p["ready_timeout_s"])
        for i in range(p["warmup_requests"]):  # as vLLM's test prompt: a server that cannot answer it fails the job
            answer = send(body_of([{"role": "user", "content": WARMUP_PROMPT}], endpoint, job.n_gen, banned))
            if not answer.ok:
                raise WorkloadError(f"warm-up request {i} failed, so no run was started: {answer.error}")
        for r, warm in repetitions(ctx):
            picked = [units[(r * n + i) % len(units)] for i in range(n)]
            bodies = [[body_of(a.messages, endpoint, a.max_tokens, banned) for a in unit] for unit in picked]
            schedule = arrivals(n, p["request_rate"], seed=job.seed * 1_000_003 + r)
            energy = EnergyTrace(ctx.meter) if ctx.meter is not None else contextlib.nullcontext()
            ctx.emit("sending", index=r, requests=n)  # a run takes n / rate seconds: its start is progress too
            with TreeWindow(server.proc.pid, p["memory_interval_ms"] / 1000.0, hwm_ok) as memory, energy as trace:
                result = drive(schedule, bodies, send, p["max_concurrency"])
            hwm_ok = memory.hwm_ok
            if server.proc.poll() is not None:
                raise ServerError(
                    f"the {job.engine} server exited with status {server.proc.returncode} during run {r}",
                    server.log_tail(),
                )
            errors = [x.error for x in result.requests if not x.ok]
            if result.requests and len(errors) == len(result.requests):
                raise WorkloadError(f"every request of run {r} failed ({len(errors)}); the first: {errors[0]}")
            run_figures, per_request, gaps = figures(result, p["slo"], p["request_rate"], p["multi_turn"])
            if trace is not None:  # a GPU's steady-state joules per token (ML.ENERGY's window)
                run_figures.update(steady_energy(result.requests, capacity, trace))
            for values in per_request:
                log.add(values, warmup=warm)
            for gap in gaps:
                log.add({"serve_itl_ms": gap}, warmup=warm)
            log.add({**run_figures, **memory.figures()}, warmup=warm)
            lag = client_lag(result, p["request_rate"])
            runs.append(
                {
                    "repetition": r,
                    "warmup": warm,
                    "requests": len(result.requests),
                    "failed": len(errors),
                    "duration_s": result.duration_s,
                    "errors": errors[:ERRORS_KEPT],
                    "token_sources": sorted({x.token_source for x in result.requests if x.ok}),
                    **lag,
                }
            )
            ctx.emit(
                "run",
                index=r,
                failed=len(errors),
                errors=errors[:3],
                duration_s=round(result.duration_s, 2),
                client_behind=lag["client_behind"],
            )
            done(ctx, r, warm)
    finally:
        stop_s, clean = server.stop(p["stop_timeout_s"])
    extra = {
        "ready_s": ready_s,
        "stop_s": stop_s,
        "clean_stop": clean,
        "memory_interval_ms": p["memory_interval_ms"],
        "hwm_supported": hwm_ok,
        **server_facts(job, cmd, p["context_tokens"], slots),
        "batching": served,
        "request": request_facts(body_of([{"role": "user", "content": ""}], endpoint, job.n_gen, banned)),
        "prompts": {
            "source": p["prompts"],
            "format": p["prompt_format"],
            "units": len(units),
            "units_sent": needed,
            # fewer units than the runs send: later runs resend earlier prompts, which a prompt cache serves
            "repeated": needed > len(units),
            **sampled,
        },
        "endpoint": path,
        "runs": runs,
        "context_check": context_check,
        "chat_template": bool(template),
        "client_behind": any(x["client_behind"] for x in runs if not x["warmup"]),
    }
    return Outcome(samples=log.samples, engine=engine_for(job), extra=extra, own_peak=False)
