"""Sweep spec validation and expansion: bad input names its field; expansion is pure and deterministic."""

from __future__ import annotations

import json

import pytest

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import count_jobs, expand
from siliconbench.contract.manifest import ModelCatalog, write_manifest
from siliconbench.contract.spec import load_sweep, parse_sweep

from tests.contract.manifests import _manifest


@pytest.fixture
def catalog(tmp_path):
    for name, kw in [("m1", {}), ("short", {"n_ctx": 256}), ("escaper", {"escape": True})]:
        d = tmp_path / name
        d.mkdir()
        write_manifest(d, _manifest(name, **kw))
    return ModelCatalog(tmp_path)


def base(**kw) -> dict:
    return {"name": "t", "models": ["m1"], **kw}


def test_expansion_is_deterministic_and_alternates_engines(catalog):
    spec = parse_sweep(
        base(
            quantizations=["full", "q4"],
            workloads=[{"kind": "generate", "prompt_tokens": [64, 128], "gen_tokens": [16], "depth": [0, 32]}],
        )
    )
    a, b = expand(spec, catalog), expand(spec, catalog)
    assert [j.job_id for j in a] == [j.job_id for j in b]
    assert len({j.job_id for j in a}) == len(a) == count_jobs(spec) == 16
    assert [j.engine for j in a[:4]] == ["llama.cpp", "mlx", "llama.cpp", "mlx"]
    assert {(j.engine, j.quant) for j in a} == {
        ("llama.cpp", "F16"),
        ("llama.cpp", "Q4_K_M"),
        ("mlx", "f32"),
        ("mlx", "4bit"),
    }
    # a different sweep id gives different job ids for the same matrix
    assert expand(spec, catalog, sweep_id="other")[0].job_id != a[0].job_id


def test_exact_quant_name_selects_only_the_engine_that_has_it(catalog):
    jobs = expand(parse_sweep(base(quantizations=["Q4_K_M"])), catalog)
    assert [(j.engine, j.quant) for j in jobs] == [("llama.cpp", "Q4_K_M")]


@pytest.mark.parametrize(
    "data, field, needle",
    [
        (base(engines=["llama.cpp", "vllm"]), "engines[1]", "llama.cpp, mlx"),
        (
            base(workloads=[{"kind": "generate", "prompt_tokens": [0]}]),
            "workloads[0].prompt_tokens[0]",
            "greater than 0",
        ),
        (base(workloads=[{"kind": "generate", "gen_tokens": [-5]}]), "workloads[0].gen_tokens[0]", "greater than 0"),
        (base(repetitions=0), "repetitions", "greater than 0"),
        (base(colour="blue"), "colour", "Known settings"),
        ({"models": ["m1"]}, "name", "required"),
        (base(workloads=[{"kind": "training"}]), "workloads[0]", "generate"),
        (base(models=["m1", "m1"]), "models", "more than once"),
    ],
)
def test_structural_errors_name_the_field(data, field, needle):
    with pytest.raises(UserError) as e:
        parse_sweep(data)
    assert e.value.field == field
    assert needle in str(e.value)


@pytest.mark.parametrize(
    "data, field, needle",
    [
        (base(models=["nope"]), "models[0]", "m1"),  # lists the valid models
        (base(models=["../m1"]), "models[0]", "is a path"),
        (base(models=["escaper"], quantizations=["q4"]), "models[0]", "outside the models folder"),
        (base(quantizations=["Q2_K"]), "quantizations[0]", "Q4_K_M"),
        (
            base(models=["short"], workloads=[{"kind": "generate", "prompt_tokens": [200], "gen_tokens": [100]}]),
            "workloads[0]",
            "context of 256",
        ),
        (base(max_jobs=3, workloads=[{"kind": "generate", "prompt_tokens": [1, 2, 3]}]), "max_jobs", "6 jobs"),
    ],
)
def test_catalog_errors_name_the_field(catalog, data, field, needle):
    with pytest.raises(UserError) as e:
        expand(parse_sweep(data), catalog)
    assert e.value.field == field
    assert needle in str(e.value)


def test_absurd_matrix_is_refused_before_expanding(catalog):
    spec = parse_sweep(
        base(
            workloads=[
                {
                    "kind": "generate",
                    "prompt_tokens": list(range(1, 101)),
                    "gen_tokens": list(range(1, 101)),
                    "depth": [0],
                }
            ]
        )
    )
    assert count_jobs(spec) == 20_000
    with pytest.raises(UserError, match="20,000 jobs, over the limit of 10,000"):
        expand(spec, catalog)


def test_yaml_errors(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_sweep(p)
    p.write_text(json.dumps(["a list"]))
    with pytest.raises(UserError, match="mapping"):
        load_sweep(p)
    with pytest.raises(UserError, match="cannot read"):
        load_sweep(tmp_path / "missing.yaml")


def test_a_model_the_fleet_does_not_know_is_refused_saying_where_models_come_from(tmp_path):
    """The coordinator keeps no models: its catalog is what the workers registered. A name none holds is refused
    with the way forward, not a double negative."""
    from siliconbench.contract.manifest import ModelCatalog

    empty = ModelCatalog(tmp_path, where="registered worker")
    with pytest.raises(UserError) as e:
        empty.get("my-model")
    said = e.value.message
    assert "No registered worker holds any model yet" in said and "has no" not in said
    assert "siliconbench models add my-model SOURCE" in said and "hf:" in said
