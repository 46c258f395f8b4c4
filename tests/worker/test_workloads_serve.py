"""The serve workload against the engines' real servers on 127.0.0.1: a user's chat prompts on SmolLM2 (it has a chat
template) at two request rates on llama-server and mlx_lm.server; multi-turn replays and the prompt cache; and every
bad input only a run can meet: a model without a chat template, a prompt past the context, a server that dies mid-run.

Every test checks that the servers it caused are gone afterwards, by the process groups the job announced."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from llama_cpp import Llama

from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import parse_sweep
from siliconbench.contract.workloads.base import MAX_USER_FILE_BYTES

from siliconbench.coordinator.reports.export import result_record
from siliconbench.coordinator.reports.workload_tables import workload_table
from siliconbench.storage import sweep_store
from siliconbench.storage.database import session_scope
from siliconbench.worker.job.perform import perform_job
from siliconbench.worker.runtime.files import fetch_missing
from siliconbench.worker.serving.client import stream_completion, stream_request
from siliconbench.worker.serving.process import free_port
from tests.conftest import SMALL
from tests.workload_helpers import assert_no_process_left, jobs_for, run, values

ROOT_PROMPTS = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "prompts", "chat.jsonl")


def smol_jobs(smol, **workload) -> list:
    models_dir, manifest = smol
    spec = parse_sweep(
        {
            "name": "serve",
            "models": [manifest.name],
            "engines": workload.pop("engines", ["llama.cpp", "mlx"]),
            "quantizations": ["q4"],
            "repetitions": workload.pop("repetitions", 1),
            "warmup": 0,
            "timeout_s": 600,
            "workloads": [{"kind": "serve", "prompts": os.path.abspath(ROOT_PROMPTS), **workload}],
        }
    )
    return expand(spec, ModelCatalog(models_dir))


def render(table) -> str:
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(table)
    return console.export_text()


def test_chat_prompts_at_two_rates_on_both_servers(models_dir, tmp_path):
    """The user's chat JSONL on the tiny model (it has a chat template) at a Poisson rate and all at once."""
    jobs = jobs_for(
        models_dir,
        {
            "kind": "serve",
            "prompts": os.path.abspath(ROOT_PROMPTS),
            "request_rate": [4, "inf"],
            "num_requests": 8,
            "max_tokens": 12,
            "slots": 4,
            "slo": {"ttft_ms": 60_000, "e2el_ms": 0.01},
        },
        engines=["llama.cpp", "mlx"],
        quantizations=["full"],
        repetitions=1,
    )
    assert len(jobs) == 4
    records = []
    for job in jobs:
        res, events = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        assert_no_process_left(events)
        ttft, tpot, e2el = (values(res, m) for m in ("serve_ttft_ms", "serve_tpot_ms", "serve_e2el_ms"))
        assert len(ttft) == len(e2el) == 8 and len(tpot) == 8
        assert all(0 < t < e for t, e in zip(ttft, e2el, strict=True))
        # every request generated exactly max_tokens (EOS banned), as the server counted them
        assert values(res, "serve_output_tokens") == [12.0] * 8
        prompts = values(res, "serve_prompt_tokens")
        assert len(prompts) == 8 and all(p > 10 for p in prompts)  # the chat template's tokens are in the count
        assert values(res, "serve_failed_requests") == [0.0]
        assert values(res, "serve_request_throughput")[0] > 0
        # E2EL 0.01 ms is unreachable: goodput 0, not missing
        assert values(res, "serve_request_goodput") == [0.0]
        sent = values(res, "serve_sent_rate")
        if job.params["request_rate"] == "inf":
            assert sent == []
        else:
            assert sent and 1.0 < sent[0] < 6.0  # seeded Poisson, 8 arrivals scaled to 8 / 4 s (late on a busy host)
        assert len(values(res, "serve_itl_ms")) > 0
        assert res.extra["endpoint"] == "/v1/chat/completions" and res.extra["chat_template"] is True
        assert res.extra["runs"][0]["failed"] == 0 and res.extra["prompts"]["format"] == "chat"
        assert "messages" not in res.extra["request"] and res.extra["request"]["temperature"] == 0.0
        # the client's lag against its schedule, per unit, and each run's verdict on it
        assert len(values(res, "serve_send_delay_ms")) == 8 and "client_behind" in res.extra["runs"][0]
        assert res.extra["prompts"]["repeated"] is False and res.extra["prompts"]["units_sent"] == 8
        if job.engine == "llama.cpp":
            assert res.extra["server"] == "llama-server" and res.extra["slots"] == 4
            assert "--parallel" in res.extra["server_args"]
            # llama-server's own account of each request beside the client's
            assert len(values(res, "serve_server_prompt_ms")) == 8 and len(values(res, "serve_server_decode_ms")) == 8
        else:
            # mlx_lm.server batches: no slots, its batch as configured (its decode_concurrency, within the client's 8)
            assert res.extra["server"] == "mlx_lm.server" and "slots" not in res.extra
            assert res.extra["batching"]["batches"] is True and res.extra["batching"]["max_batch"] > 1
            assert values(res, "serve_server_prompt_ms") == []
        rec = result_record(job, res)
        assert "prompts_body" not in rec["params"] and rec["params"]["prompts"].startswith("sha256:")
        records.append(rec)
    text = render(workload_table("serve", records))
    assert "llama-server ×4" in text and "mlx_lm.server" in text and "all at once" in text and "4 → " in text


def test_a_real_chat_model_applies_its_own_template_on_both_servers(smol):
    """SmolLM2-135M-Instruct's own template: both servers count the same chat the same way."""
    models_dir, _ = smol
    jobs = smol_jobs(smol, request_rate=["inf"], num_requests=2, max_tokens=4)
    counts = {}
    for job in jobs:
        res, events = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        assert_no_process_left(events)
        assert values(res, "serve_output_tokens") == [4.0, 4.0]
        counts[job.engine] = sorted(values(res, "serve_prompt_tokens"))
    # one template (the model's), one tokenizer: the same prompt tokens on both servers
    assert counts["llama.cpp"] == counts["mlx"] and min(counts["mlx"]) > 20


@pytest.mark.parametrize("engine", ["llama.cpp", "mlx"])
def test_multi_turn_replays_conversations_and_reports_the_reused_prefix(models_dir, engine):
    """Each conversation's turns in order: a later turn's history is the prefix the server may have cached (llama-server
    in the slot it picks, mlx_lm.server in its LRU prompt cache); both say how many prompt tokens they reused."""
    job = jobs_for(
        models_dir,
        {
            "kind": "serve",
            "prompts": os.path.abspath(ROOT_PROMPTS),
            "multi_turn": True,
            "num_requests": 4,
            "request_rate": ["inf"],
            "max_tokens": 6,
        },
        engines=[engine],
        quantizations=["full"],
        repetitions=1,
    )[0]
    res, events = run(job, models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    assert_no_process_left(events)
    # the first 4 conversations of examples/prompts/chat.jsonl have 3 + 2 + 3 + 1 user turns
    assert len(values(res, "serve_ttft_ms")) == 9
    cached = values(res, "serve_cached_prompt_tokens")
    assert len(cached) == 9 and max(cached) > 0  # a later turn found its history in the server's cache
    assert 0 < values(res, "serve_prompt_reuse_pct")[0] < 100


def test_a_model_without_a_chat_template_is_refused_naming_completions(models_dir, tmp_path):
    job = jobs_for(
        models_dir,
        {"kind": "serve", "num_requests": 2, "prompt_tokens": 16, "max_tokens": 4},
        engines=["mlx"],
        quantizations=["full"],
    )[0]
    # the user's own folder without a template: a copy of the tiny model's MLX form with it taken out
    own = models_dir / job.model / "mlx-no-template"
    if not own.exists():
        shutil.copytree(models_dir / job.artifact, own)
        cfg = json.loads((own / "tokenizer_config.json").read_text())
        cfg.pop("chat_template", None)
        (own / "tokenizer_config.json").write_text(json.dumps(cfg))
        for extra in ("chat_template.jinja", "chat_template.json"):
            (own / extra).unlink(missing_ok=True)
    res, events = run(job.model_copy(update={"artifact": str(own.relative_to(models_dir))}), models_dir)
    assert res.status == "failed" and "has no chat template" in res.error and "endpoint: completions" in res.error
    assert not [e for e in events if e["event"] == "spawned"]  # refused before any server started
    # raw text through /v1/completions is the way, and it works
    raw = jobs_for(
        models_dir,
        {"kind": "serve", "num_requests": 2, "prompt_tokens": 16, "max_tokens": 4, "endpoint": "completions"},
        engines=["mlx"],
        quantizations=["full"],
    )[0]
    res, events = run(raw.model_copy(update={"artifact": str(own.relative_to(models_dir))}), models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    assert res.extra["endpoint"] == "/v1/completions" and values(res, "serve_output_tokens") == [4.0] * 4
    assert_no_process_left(events)


def test_a_prompt_longer_than_the_context_is_refused_before_the_run(models_dir, tmp_path):
    prompts = tmp_path / "long.txt"
    prompts.write_text("a short question\n" + "the long one " * 400 + "\n")
    job = jobs_for(
        models_dir,
        {"kind": "serve", "prompts": str(prompts), "endpoint": "completions", "context_tokens": 256, "max_tokens": 8},
        engines=["llama.cpp"],
        quantizations=["full"],
    )[0]
    res, events = run(job, models_dir)
    assert res.status == "failed"
    assert "request 1" in res.error and "tokens of content" in res.error and "context of 256" in res.error
    assert not [e for e in events if e["event"] == "spawned"]


def test_a_server_that_dies_mid_run_fails_the_job_with_its_log(models_dir):
    port = free_port()
    job = jobs_for(
        models_dir,
        {"kind": "serve", "num_requests": 40, "request_rate": [4], "prompt_tokens": 16, "max_tokens": 8, "port": port},
        engines=["llama.cpp"],
        quantizations=["full"],
    )[0]
    killed: list[int] = []
    server: list[int] = []

    def kill_mid_run(pgid: int) -> None:  # the server this test's job started, by its process group
        time.sleep(1.0)  # a few of run 0's 40 requests (10 s at 4/s) sent; not in the warm-up, which a loaded
        os.killpg(pgid, signal.SIGKILL)  # machine can stretch past any fixed delay after the server answers
        killed.append(pgid)

    def on_event(e: dict) -> None:
        events.append(e)
        if e["event"] == "spawned":
            server.append(e["pgid"])
        if e["event"] == "sending" and e["index"] == 0:
            threading.Thread(target=kill_mid_run, args=(server[0],), daemon=True).start()

    from siliconbench.worker.job.child import run_in_child

    events: list[dict] = []
    res = run_in_child(job, models_dir, on_event=on_event)
    assert killed, "the server was never seen serving"
    assert res.status == "failed" and "server exited" in res.error and "during run 0" in res.error
    assert_no_process_left(events)


@pytest.mark.parametrize("rate", [200])
def test_a_rate_the_server_cannot_sustain_is_reported_not_hidden(models_dir, rate):
    job = jobs_for(
        models_dir,
        {
            "kind": "serve",
            "num_requests": 24,
            "request_rate": [rate],
            "prompt_tokens": 128,
            "max_tokens": 128,  # each request long enough that one slot serves far below the sent rate on a fast host too
            "ignore_eos": True,
            "slots": 1,
        },
        engines=["llama.cpp"],
        quantizations=["full"],
    )[0]
    res, events = run(job, models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    assert_no_process_left(events)
    sent, served = values(res, "serve_sent_rate")[0], values(res, "serve_request_throughput")[0]
    assert sent > rate / 10  # the client sent far faster than one slot serves
    assert served < sent / 2  # one slot served far fewer: shown as it is
    ttft = values(res, "serve_ttft_ms")
    assert max(ttft) > 3 * min(ttft)  # the queue grew


def test_a_failing_warm_up_or_a_run_of_only_failures_fails_the_job_with_the_first_error(models_dir):
    """A real server that cannot stream 64 tokens within the request's total timeout (1 ms; a fast server streams each
    chunk well within it, so the timeout is the request's total, not one read's): the warm-up's failure stops the job before
    any run (as vLLM's test prompt does); without warm-up, a run whose every request failed fails the job instead of
    being stored ok with zero throughput."""
    base = {"kind": "serve", "num_requests": 3, "prompt_tokens": 16, "max_tokens": 64, "request_timeout_s": 0.001}
    for warmup, said in ((1, "warm-up request 0 failed"), (0, "every request of run 0 failed (3)")):
        job = jobs_for(
            models_dir,
            {**base, "warmup_requests": warmup},
            engines=["llama.cpp"],
            quantizations=["full"],
            repetitions=1,
        )[0]
        res, events = run(job, models_dir)
        assert res.status == "failed" and said in res.error, res.error
        assert "timed out" in res.error or "TimeoutError" in res.error  # the request's own error, kept
        assert_no_process_left(events)


class _EventStream(BaseHTTPRequestHandler):
    """A hand-made server's answer to any POST: 200 and an event stream of what ``chunks`` yields, each sent apart."""

    chunks: Callable[[], Iterator[bytes]]

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in type(self).chunks():
            self.wfile.write(chunk)
            self.wfile.flush()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def event_stream_server(chunks: Callable[[], Iterator[bytes]]) -> Iterator[int]:
    """A server on 127.0.0.1 streaming ``chunks()`` to every POST, for the block; its port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_EventStream,), {"chunks": staticmethod(chunks)}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_malformed_answer_is_that_requests_failure():
    """A server whose stream holds a chunk no client expects: the request fails with what was wrong, never raises."""
    with event_stream_server(lambda: iter([b"data: [1, 2]\n\ndata: [DONE]\n\n"])) as port:
        r = stream_request(port, "/v1/completions", {"prompt": "x", "max_tokens": 2}, 5.0)
    assert not r.ok and r.error.startswith("AttributeError")


def test_the_request_timeout_is_the_requests_total_not_one_reads():
    """A server streaming a chunk every 10 ms for 0.4 s: each read is well within a 0.1 s socket timeout, yet the
    request runs past its 0.1 s total and fails as timed out (vLLM's timeout is the request's total)."""

    def trickle():
        for _ in range(40):
            yield b'data: {"choices": [{"text": "a", "finish_reason": null}]}\n\n'
            time.sleep(0.01)
        yield b"data: [DONE]\n\n"

    with event_stream_server(trickle) as port:
        served = stream_request(port, "/v1/completions", {"prompt": "x", "max_tokens": 40}, 0.1)
        streamed = stream_completion(port, {"prompt": "x", "max_tokens": 40}, 0.1)
    assert not served.ok and served.error.startswith("TimeoutError") and "request_timeout_s" in served.error
    assert not streamed.ok and streamed.error.startswith("TimeoutError")
    assert len(served.chunk_times) >= 1  # chunks did arrive: the total ran out, not a read


def test_a_concurrency_sweep_runs_one_closed_loop_job_per_concurrency(models_dir):
    jobs = jobs_for(
        models_dir,
        {"kind": "serve", "max_concurrency": [1, 3], "num_requests": 6, "prompt_tokens": 16, "max_tokens": 8},
        engines=["llama.cpp"],
        quantizations=["full"],
        repetitions=1,
    )
    assert [j.params["max_concurrency"] for j in jobs] == [1, 3]
    records = []
    for job in jobs:
        res, events = run(job, models_dir)
        assert res.status == "ok", (res.error, res.stderr_tail)
        assert_no_process_left(events)
        assert values(res, "serve_output_tokens") == [8.0] * 6
        records.append(result_record(job, res))
    text = render(workload_table("serve", records))
    assert "closed loop ≤1" in text and "closed loop ≤3" in text


def test_sharegpt_sends_each_first_turn_and_asks_its_replys_length(models_dir, tmp_path):
    """vLLM's ShareGPT sampling: the first human turn only, max_tokens = the first reply's tokens (the server's own
    count of what it generated agrees), a conversation of one turn left out and said so."""
    replies = ["the river ran over the stones and down", "a short one here", "and a reply of some length to count on"]
    convs = [{"conversations": [{"from": "human", "value": "alone"}]}] + [
        {"conversations": [{"from": "human", "value": f"question {i} about the weather"}, {"from": "gpt", "value": r}]}
        for i, r in enumerate(replies)
    ]
    path = tmp_path / "share.jsonl"
    path.write_text("\n".join(json.dumps(c) for c in convs) + "\n")
    job = jobs_for(
        models_dir,
        {"kind": "serve", "prompts": str(path), "endpoint": "chat", "num_requests": 3, "warmup_requests": 0},
        engines=["llama.cpp"],
        quantizations=["full"],
        repetitions=1,
    )[0]
    assert job.params["sharegpt"] == "first_turn"
    vocab = Llama(model_path=str(models_dir / job.artifact), vocab_only=True, verbose=False)
    want = sorted(float(len(vocab.tokenize(r.encode(), add_bos=False, special=False))) for r in replies)
    res, events = run(job, models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    assert_no_process_left(events)
    assert sorted(values(res, "serve_output_tokens")) == want
    sampled = res.extra["prompts"]
    assert sampled["kept"] == 3 and sampled["left_out"]["fewer_than_two_turns"] == 1


def test_a_prompt_file_over_16_mib_travels_by_digest_and_a_worker_without_it_fetches_it(
    models_dir, tmp_path, sqlite_url, monkeypatch
):
    """A dataset is not copied into every job: the job names its digest and where it was read; storing the sweep keeps
    its bytes once; a worker on which that path is gone fetches them from the database into its own cache."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "worker-data"))  # this worker's cache of stored files
    big = tmp_path / "dataset.txt"
    line = "a prompt of the dataset, number {} of many, long enough to be a question worth asking the model\n"
    with big.open("w") as f:
        for i in range(190_000):
            f.write(line.format(i))
    assert big.stat().st_size > MAX_USER_FILE_BYTES
    spec = parse_sweep(
        {
            "name": "big",
            "models": [SMALL],
            "engines": ["llama.cpp"],
            "quantizations": ["full"],
            "repetitions": 1,
            "warmup": 0,
            "workloads": [
                {"kind": "serve", "prompts": str(big), "endpoint": "completions", "num_requests": 3, "max_tokens": 4}
            ],
        }
    )
    job = expand(spec, ModelCatalog(models_dir))[0]
    assert "prompts_body" not in job.params and job.params["prompts_units"] == 190_000
    assert job.files == {"prompts_file": str(big)} and len(job.model_dump_json()) < 10_000
    with session_scope(sqlite_url) as s:
        sweep_store.create_sweep(s, job.sweep_id, spec, [job])
    big.rename(tmp_path / "moved.txt")  # another machine: the path the sweep was read at holds nothing here

    # without a copy here, the job fails saying so, before any server starts
    res = perform_job(job, models_dir)
    assert res.status == "failed" and "no longer holds" in res.error and "this machine has no copy" in res.error
    assert fetch_missing(job, sqlite_url) is None  # the worker's step before every job: from the database, once
    assert (tmp_path / "worker-data" / "siliconbench" / "files").is_dir()
    res = perform_job(job, models_dir)
    assert res.status == "ok", (res.error, res.stderr_tail)
    assert values(res, "serve_output_tokens") == [4.0] * 3 and res.extra["prompts"]["units"] == 190_000
