"""The serve workload's sweep settings and prompt files: every bad input refused by field and line before anything
runs; the prompt file's content, not its name, in each job's identity; the arrivals and vLLM's arithmetic.

No engine runs here (the catalogs are manifests only); tests/worker/test_workloads_serve.py runs the servers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from siliconbench.contract.aggregate import summarize, tail_certified
from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog, write_manifest
from siliconbench.contract.spec import load_sweep, parse_sweep
from siliconbench.contract.workloads import notices

from siliconbench.coordinator.reports.serving import ServePoint, pareto_front
from siliconbench.coordinator.reports.workload_tables import pct
from siliconbench.worker.serving.client import ServedRequest
from siliconbench.worker.serving.load import Run, arrivals, client_lag, drive, figures
from tests.contract.manifests import _manifest

ROOT = Path(__file__).resolve().parents[2]
CHAT = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": "ok?"},
]


@pytest.fixture
def catalog(tmp_path) -> ModelCatalog:
    """The example's model and the tiny one, manifests only (expansion opens no artifact)."""
    for name in ("tiny-llama-30m", "smollm2-135m"):
        (tmp_path / "models" / name).mkdir(parents=True)
        write_manifest(tmp_path / "models" / name, _manifest(name))
    return ModelCatalog(tmp_path / "models")


def serve_jobs(catalog, sweep: dict | None = None, **workload):
    spec = parse_sweep(
        {
            "name": "s",
            "models": ["tiny-llama-30m"],
            "engines": ["llama.cpp", "mlx"],
            "workloads": [{"kind": "serve", **workload}],
            **(sweep or {}),
        }
    )
    return expand(spec, catalog)


def refused(catalog, **workload) -> str:
    with pytest.raises(UserError) as e:
        serve_jobs(catalog, **workload)
    return str(e.value)


def write(tmp_path, name: str, lines: list) -> str:
    p = tmp_path / name
    p.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return str(p)


def test_one_job_per_rate_and_engine_with_the_files_digest_and_body(catalog, tmp_path):
    path = write(tmp_path, "mine.jsonl", [{"messages": CHAT}, {"messages": CHAT[:1]}])
    jobs = serve_jobs(catalog, prompts=path, request_rate=[0.5, "inf"], slo={"ttft_ms": 500, "tpot_ms": 50})
    assert sorted((j.engine, str(j.params["request_rate"])) for j in jobs) == [
        ("llama.cpp", "0.5"),
        ("llama.cpp", "inf"),
        ("mlx", "0.5"),
        ("mlx", "inf"),
    ]
    for j in jobs:
        assert j.params["prompts"].startswith("sha256:") and j.params["prompt_format"] == "chat"
        assert j.params["prompts_body"] == [CHAT, CHAT[:1]] and j.params["slo"] == {"ttft_ms": 500, "tpot_ms": 50}
        assert j.n_gen == 64 and j.params["endpoint"] == "chat"
    # llama-server's slots are a llama.cpp job's; MLX's server has none, so no MLX job differs by them
    assert {j.engine: ("slots" in j.params) for j in jobs} == {"llama.cpp": True, "mlx": False}
    assert {j.params.get("server") for j in jobs if j.engine == "llama.cpp"} == {"llama-server"}
    again = serve_jobs(catalog, prompts=path, request_rate=[0.5, "inf"], slo={"ttft_ms": 500, "tpot_ms": 50})
    assert [j.job_id for j in again] == [j.job_id for j in jobs]
    # the same name, another content: another benchmark
    write(tmp_path, "mine.jsonl", [{"messages": CHAT}])
    changed = serve_jobs(catalog, prompts=path, request_rate=[0.5, "inf"], slo={"ttft_ms": 500, "tpot_ms": 50})
    assert not {j.job_id for j in changed} & {j.job_id for j in jobs}


def test_formats_sharegpt_array_sharegpt_jsonl_and_text(catalog, tmp_path):
    share = [
        {
            "conversations": [
                {"from": "human", "value": "a"},
                {"from": "gpt", "value": "b"},
                {"from": "human", "value": "c"},
            ]
        }
    ]
    (tmp_path / "s.json").write_text(json.dumps(share))
    jobs = serve_jobs(catalog, {"repetitions": 1}, prompts=str(tmp_path / "s.json"), multi_turn=True, num_requests=1)
    assert jobs[0].params["prompt_format"] == "sharegpt"
    assert jobs[0].params["prompts_body"] == [
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    ]
    lines = write(tmp_path, "s.jsonl", share)
    assert serve_jobs(catalog, prompts=lines)[0].params["prompt_format"] == "sharegpt"
    text = tmp_path / "p.txt"
    text.write_text("first prompt\n\nsecond prompt\n")
    jobs = serve_jobs(catalog, prompts=str(text), endpoint="completions")
    assert jobs[0].params["prompts_body"] == [
        [{"role": "user", "content": "first prompt"}],
        [{"role": "user", "content": "second prompt"}],
    ]


def test_a_malformed_line_is_refused_with_its_number_and_nothing_expands(catalog, tmp_path):
    path = write(
        tmp_path,
        "bad.jsonl",
        [{"messages": CHAT}, '{"messages": [{"role": "user", "content": "x"}', {"messages": CHAT}],
    )
    msg = refused(catalog, prompts=path)
    assert "workloads[0].prompts" in msg and "line 2 is not JSON" in msg
    path = write(tmp_path, "arr.jsonl", [{"messages": CHAT}, [1, 2]])
    assert "line 2 is a JSON list" in refused(catalog, prompts=path)
    path = write(tmp_path, "role.jsonl", [{"messages": [{"role": "bot", "content": "x"}]}])
    assert "line 1 message 0" in refused(catalog, prompts=path)
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8" in refused(catalog, prompts=str(tmp_path / "bin.jsonl"))
    assert "is not a file" in refused(catalog, prompts=str(tmp_path / "missing.jsonl"))


def test_a_conversation_without_a_user_turn_is_refused(catalog, tmp_path):
    path = write(
        tmp_path, "nouser.jsonl", [{"messages": CHAT}, {"messages": [{"role": "system", "content": "be brief"}]}]
    )
    msg = refused(catalog, prompts=path)
    assert "line 2 has no user turn" in msg
    share = write(tmp_path, "nouser-share.jsonl", [{"conversations": [{"from": "gpt", "value": "hello"}]}])
    assert "line 1 has no user turn" in refused(catalog, prompts=share)


def test_settings_that_cannot_work_are_refused_by_field(catalog, tmp_path):
    chat = write(tmp_path, "c.jsonl", [{"messages": CHAT}])
    assert "workloads[0].endpoint" in refused(catalog, prompts=chat, endpoint="completions")
    single = write(tmp_path, "one.jsonl", [{"messages": CHAT[:1]}])
    assert "workloads[0].multi_turn" in refused(catalog, prompts=single, multi_turn=True)
    assert "workloads[0].multi_turn" in refused(catalog, multi_turn=True)  # the corpus has no conversations
    assert "workloads[0].context_tokens" in refused(catalog, context_tokens=10**6)
    assert "workloads[0].prompt_tokens" in refused(catalog, prompt_tokens=4000, context_tokens=2048)
    for bad, field in (
        ({"request_rate": [0]}, "request_rate"),
        ({"request_rate": ["fast"]}, "request_rate"),
        ({"slo": {}}, "slo"),
        ({"slo": {"ttft": 5}}, "slo"),
        ({"num_requests": 0}, "num_requests"),
    ):
        with pytest.raises(UserError) as e:
            parse_sweep({"name": "s", "models": ["m1"], "workloads": [{"kind": "serve", **bad}]})
        assert field in str(e.value), (bad, str(e.value))


def test_a_run_longer_than_the_jobs_timeout_is_refused_before_anything_is_stored(catalog):
    spec = parse_sweep(
        {
            "name": "s",
            "models": ["tiny-llama-30m"],
            "timeout_s": 600,
            "repetitions": 5,
            "workloads": [{"kind": "serve", "request_rate": [4, 0.5], "num_requests": 100}],
        }
    )
    with pytest.raises(UserError) as e:
        expand(spec, catalog)
    # at 0.5 req/s, 100 arrivals take 200 s a run, 1,000 s over 5 repetitions; at 4/s 125 s fits
    assert e.value.field == "workloads[0].request_rate" and "1,000 s" in e.value.message
    assert "timeout_s = 600" in e.value.message


def test_the_example_sweep_finds_its_prompts_beside_it(catalog):
    spec = load_sweep(ROOT / "examples/serve.yaml")
    jobs = expand(spec, catalog)
    assert {j.engine for j in jobs} == {"llama.cpp", "mlx"} and len(jobs) == 4 + 6  # two rates, three concurrencies
    assert all(len(j.params["prompts_body"]) == 8 for j in jobs)
    assert sorted({j.params["max_concurrency"] or 0 for j in jobs}) == [0, 1, 2, 4]
    assert notices(jobs) == []  # 8 prompts, 8 requests a job: nothing repeats


def test_arrivals_are_seeded_poisson_scaled_to_n_over_rate():
    a, b = arrivals(200, 4.0, seed=1), arrivals(200, 4.0, seed=1)
    assert a == b and a != arrivals(200, 4.0, seed=2)
    assert a == sorted(a) and math.isclose(a[-1], 200 / 4.0)
    gaps = [y - x for x, y in zip([0.0] + a, a, strict=False)]
    mean = sum(gaps) / len(gaps)
    cv = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5 / mean
    assert 0.8 < cv < 1.2  # exponential gaps: their spread equals their mean
    assert arrivals(5, "inf", seed=0) == [0.0] * 5


def test_figures_follow_vllms_arithmetic():
    def req(t0, chunks, out, prompt=10, cached=None, ok=True):
        return ServedRequest(
            t_sent=t0,
            ok=ok,
            chunk_times=chunks,
            t_last=chunks[-1] if chunks else None,
            prompt_tokens=prompt,
            output_tokens=out,
            cached_tokens=cached,
        )

    run = Run(t0=0.0, t_end=4.0)
    run.requests = [
        req(0.0, [0.5, 0.6, 0.7, 0.9], 4, cached=5),  # ttft 500, tpot (900-500)/3
        req(1.0, [1.2], 1, cached=0),  # one token: no TPOT, 0 for goodput
        req(2.0, [], 0, ok=False),
    ]
    run.sends = run.unit_sends = [r.t_sent for r in run.requests]  # single-turn: each request is its unit
    out, per, gaps = figures(run, {"ttft_ms": 300, "tpot_ms": 200}, 1.5)
    assert out["serve_request_throughput"] == 2 / 4.0 and out["serve_failed_requests"] == 1
    assert out["serve_output_throughput"] == 5 / 4.0 and out["serve_total_token_throughput"] == 25 / 4.0
    assert out["serve_request_goodput"] == 1 / 4.0  # the first misses TTFT 300; the second meets both
    assert out["serve_sent_rate"] == 3 / 2.0 and out["serve_prompt_reuse_pct"] == 25.0
    assert per[0]["serve_ttft_ms"] == pytest.approx(500) and per[0]["serve_tpot_ms"] == pytest.approx(400 / 3)
    assert per[1]["serve_tpot_ms"] is None and per[0]["serve_e2el_ms"] == pytest.approx(900)
    assert gaps == pytest.approx([100, 100, 200])
    assert figures(run, None, "inf")[0]["serve_sent_rate"] is None


def test_a_concurrency_list_is_one_job_each_and_zero_is_refused(catalog):
    jobs = serve_jobs(catalog, max_concurrency=[1, 2, 4, 8])
    assert sorted((j.engine, j.params["max_concurrency"]) for j in jobs) == [
        (e, c) for e in ("llama.cpp", "mlx") for c in (1, 2, 4, 8)
    ]
    assert len({j.job_id for j in jobs}) == 8 and all(j.params["request_rate"] == "inf" for j in jobs)
    assert "max_concurrency=4" in next(j for j in jobs if j.params["max_concurrency"] == 4).label()
    # one number stays one job, of the key it had before lists existed (its history goes on)
    one = serve_jobs(catalog, max_concurrency=4)
    assert [j.key() for j in one] == [j.key() for j in jobs if j.params["max_concurrency"] == 4]
    for bad in ([1, 0, 4], [], 0):
        with pytest.raises(UserError) as e:
            parse_sweep({"name": "s", "models": ["m1"], "workloads": [{"kind": "serve", "max_concurrency": bad}]})
        assert "max_concurrency" in str(e.value), (bad, str(e.value))


def test_what_cannot_work_is_refused_at_expansion_naming_the_field(catalog, tmp_path):
    # llama_cpp.server streams no usage: an answer ending on EOS could not be counted
    msg = refused(catalog, server="llama_cpp.server", ignore_eos=False)
    assert "workloads[0].ignore_eos" in msg and "llama_cpp.server" in msg
    assert serve_jobs(catalog, server="llama-server", ignore_eos=False)  # llama-server reports usage: fine
    # a multi-turn run that would resend a conversation replays it from the server's cache
    two = write(tmp_path, "two.jsonl", [{"messages": CHAT}, {"messages": CHAT}])
    with pytest.raises(UserError) as e:
        serve_jobs(catalog, {"repetitions": 2}, prompts=two, multi_turn=True, num_requests=2)
    assert e.value.field == "workloads[0].num_requests" and "holds 2 conversations" in e.value.message
    assert serve_jobs(catalog, {"repetitions": 1}, prompts=two, multi_turn=True, num_requests=2)


def test_a_prompt_file_the_runs_repeat_is_noticed_before_anything_runs(catalog, tmp_path):
    two = write(tmp_path, "two.jsonl", [{"messages": CHAT[:1]}, {"messages": CHAT}])
    jobs = serve_jobs(catalog, {"repetitions": 3}, prompts=two, num_requests=4)
    said = notices(jobs)
    assert len(said) == 1 and "holds 2 prompts and the runs send 12" in said[0] and "10 are repeats" in said[0]
    assert notices(serve_jobs(catalog, {"repetitions": 1}, prompts=two, num_requests=2)) == []
    assert notices(serve_jobs(catalog, num_requests=64)) == []  # the corpus makes as many prompts as the runs send


def test_multi_turn_counts_conversations_and_turns_apart():
    def req(t0, chunks, out=3):
        return ServedRequest(
            t_sent=t0, ok=True, chunk_times=chunks, t_last=chunks[-1], prompt_tokens=5, output_tokens=out
        )

    run = Run(t0=0.0, t_end=4.0)
    # two conversations of two turns, the second of the second failed
    run.requests = [req(0.0, [0.2, 0.4]), req(1.0, [1.2, 1.5]), req(0.5, [0.7, 0.8]), ServedRequest(t_sent=1.5)]
    run.sends = [r.t_sent for r in run.requests]
    run.unit_sends, run.units_done, run.send_delays_s = [0.0, 0.5], 1, [0.001, 0.002]
    out, per, _gaps = figures(run, None, 1.0, multi_turn=True)
    assert out["serve_sent_rate"] == 2 / 0.5  # conversations: what request_rate counts
    assert out["serve_sent_turn_rate"] == 4 / 1.5  # every request
    assert out["serve_conversation_throughput"] == 1 / 4.0 and out["serve_request_throughput"] == 3 / 4.0
    assert [p["serve_send_delay_ms"] for p in per if "serve_send_delay_ms" in p] == pytest.approx([1.0, 2.0])
    single, _, _ = figures(run, None, 1.0)
    assert single["serve_sent_turn_rate"] is None and single["serve_conversation_throughput"] is None


def test_a_client_that_falls_behind_its_schedule_is_flagged():
    on_time = Run(send_delays_s=[0.001] * 99 + [0.004])
    assert client_lag(on_time, 4.0)["client_behind"] is False  # 4 ms late against a 250 ms mean gap
    late = Run(send_delays_s=[0.001] * 90 + [0.2] * 10)
    lag = client_lag(late, 4.0)
    assert lag["client_behind"] is True and lag["send_delay_p99_ms"] == pytest.approx(200.0)
    assert lag["behind_limit_ms"] == pytest.approx(25.0)  # 10 % of 1 / 4 req/s
    assert client_lag(Run(send_delays_s=[0.02]), "inf")["client_behind"] is True  # all at once: 10 ms floor


def test_any_exception_while_sending_is_a_failed_request_never_a_lost_one():
    """A send that raises (a malformed answer, a bug in a parser) is counted failed, with what it raised."""
    calls = []

    def send(body):
        calls.append(body)
        if body["n"] == 1:
            raise KeyError("choices")
        return ServedRequest(t_sent=0.0, ok=True, chunk_times=[0.1], t_last=0.1, output_tokens=1)

    run = drive([0.0, 0.0, 0.0], [[{"n": 0}], [{"n": 1}, {"n": 9}], [{"n": 2}]], send, None)
    assert len(run.requests) == 3 and sum(not r.ok for r in run.requests) == 1  # the turn after it never sent
    assert "KeyError" in next(r.error for r in run.requests if not r.ok)
    assert run.units_done == 2 and len(run.send_delays_s) == 3


def test_tails_too_few_requests_back_are_marked_and_the_pareto_front_is_what_nothing_beats():
    assert not tail_certified(99, 661) and tail_certified(99, 662) and tail_certified(90, 64)
    few = {"metrics": {"serve_ttft_ms": summarize([float(x) for x in range(100)]).as_dict()}}
    assert pct("serve_ttft_ms")(few) == "50 / 89 / (98)"  # 100 requests certify p90, not p99

    def point(job, tps, ttft):
        return ServePoint("s", "llama.cpp", None, 1.0, None, ttft, ttft, None, None, tps, None, 0, job)

    pts = [point("c1", 100, 50), point("c2", 180, 60), point("c4", 250, 120), point("c8", 240, 400)]
    assert [p.job_id for p in pareto_front(pts)] == ["c1", "c2", "c4"]  # c8 is beaten by c4 on both


def test_sharegpt_is_sampled_as_vllm_samples_it_unless_history_is_asked(catalog, tmp_path):
    share = [{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]}]
    path = write(tmp_path, "s.jsonl", share)
    first = serve_jobs(catalog, prompts=path)[0].params
    assert first["sharegpt"] == "first_turn" and first["output_from_reply"] is True
    fixed = serve_jobs(catalog, prompts=path, max_tokens=32)[0].params
    assert fixed["output_from_reply"] is False  # an explicit max_tokens fixes the output, as --sharegpt-output-len
    history = serve_jobs(catalog, prompts=path, sharegpt="history")[0]
    assert "sharegpt" not in history.params and "output_from_reply" not in history.params  # its identity as before
    lone = write(tmp_path, "lone.jsonl", [{"conversations": [{"from": "human", "value": "a"}]}])
    msg = refused(catalog, prompts=lone)
    assert "workloads[0].prompts" in msg and "sharegpt: history" in msg
    assert serve_jobs(catalog, prompts=lone, sharegpt="history")
    nobody = write(tmp_path, "nobody.jsonl", [{"conversations": [{"from": "gpt", "value": "hi"}]}])
    assert "has no user turn" in refused(catalog, prompts=nobody)
