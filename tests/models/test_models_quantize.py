"""`models quantize`: more forms of a model made by the engines' own quantizers, each at its level, checked."""

from __future__ import annotations

import os
import shutil

import pytest

from siliconbench.contract.errors import UserError
from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog, sha256_path
from siliconbench.contract.spec import parse_sweep

from siliconbench.worker.models.quants.quantize import quantize_model
from tests.conftest import SMALL


@pytest.fixture
def models(tmp_path, models_dir):
    d = tmp_path / "models"
    shutil.copytree(models_dir / SMALL, d / SMALL, copy_function=os.link)  # hard links: no copy
    return d


def test_gguf_types_and_mlx_widths_land_at_their_levels_and_pair_in_a_sweep(models):
    m, new = quantize_model(
        models, SMALL, gguf_types=["Q6_K", "Q5_K_M", "Q3_K_M"], mlx_bits=[6, 5, 3], recipe="mixed_3_6"
    )
    got = {(a.format, a.quant, a.level) for a in new}
    assert got == {
        ("gguf", "Q6_K", "q6"),
        ("gguf", "Q5_K_M", "q5"),
        ("gguf", "Q3_K_M", "q3"),
        ("mlx", "6bit", "q6"),
        ("mlx", "5bit", "q5"),
        ("mlx", "3bit", "q3"),
        ("mlx", "mixed_3_6", "q3"),
    }
    for a in new:
        assert sha256_path(models / SMALL / a.path) == a.sha256, a.path
        assert a.details["quantized_from"] in ("F32", "f32")
    bpw = {a.quant: a.details["bits_per_weight"] for a in new}
    assert bpw["Q3_K_M"] < bpw["Q5_K_M"] < bpw["Q6_K"] and bpw["3bit"] < bpw["mixed_3_6"] < bpw["5bit"] < bpw["6bit"]
    cat = ModelCatalog(models)
    assert len(cat.get(SMALL).artifacts) == len(m.artifacts)
    jobs = expand(parse_sweep({"name": "q", "models": [SMALL], "quantizations": ["q6", "q5"]}), cat)
    assert {(j.engine, j.quant) for j in jobs} == {
        ("llama.cpp", "Q6_K"),
        ("mlx", "6bit"),
        ("llama.cpp", "Q5_K_M"),
        ("mlx", "5bit"),
    }
    again, none = quantize_model(models, SMALL, gguf_types=["Q6_K"], mlx_bits=[6])
    assert none == [] and len(again.artifacts) == len(m.artifacts)  # already there: nothing made twice


@pytest.mark.parametrize(
    "kw, field, needle",
    [
        ({"gguf_types": ["IQ2_XXS"], "mlx_bits": [], "imatrix_file": "missing.gguf"}, "--imatrix", "not a file"),
        ({"gguf_types": ["Q9_Z"], "mlx_bits": []}, "--gguf", "not a type"),
        ({"gguf_types": [], "mlx_bits": [7]}, "--mlx", "7 bits"),
        ({"gguf_types": [], "mlx_bits": [4], "group_size": 48}, "--group-size", "48"),
    ],
)
def test_what_the_quantizers_cannot_make_is_refused_before_anything_is_written(models, kw, field, needle):
    if "imatrix_file" in kw:
        kw = {**kw, "imatrix_file": models / kw["imatrix_file"]}
    before = (models / SMALL / "manifest.json").read_text()
    with pytest.raises(UserError) as e:
        quantize_model(models, SMALL, **kw)
    assert e.value.field == field and needle in e.value.message
    assert (models / SMALL / "manifest.json").read_text() == before


def test_types_that_need_an_importance_matrix_get_one_computed_once_and_recorded(models):
    """IQ2_XXS / IQ2_M: llama-imatrix on the shipped calibration text (built by scripts/build_llama_tools.sh), then
    llama-quantize --imatrix; IQ3_S, which does not need one, is made without."""
    said: list[str] = []
    m, new = quantize_model(models, SMALL, gguf_types=["IQ2_XXS", "IQ3_S"], mlx_bits=[], say=said.append)
    by = {a.quant: a for a in new}
    assert set(by) == {"IQ2_XXS", "IQ3_S"} and by["IQ2_XXS"].level == "q2" and by["IQ3_S"].level == "q3"
    record = by["IQ2_XXS"].details["imatrix"]
    matrix = models / SMALL / record["path"]
    assert sha256_path(matrix) == record["sha256"] and record["tool"] == "llama-imatrix"
    assert record["calibration"]["from_char"] > 0 and len(record["calibration"]["sha256"]) == 64
    assert "imatrix" not in by["IQ3_S"].details
    assert by["IQ2_XXS"].details["tensor_types"].get("IQ2_XXS", 0) > 0  # the low-bit type is really used
    assert any("computing an importance matrix" in s for s in said)
    said.clear()
    _, (iq2m,) = quantize_model(models, SMALL, gguf_types=["IQ2_M"], mlx_bits=[], say=said.append)
    assert iq2m.details["imatrix"]["sha256"] == record["sha256"]  # one matrix per source and text
    assert any("reusing" in s for s in said) and not any("computing" in s for s in said)
    (given,) = quantize_model(models, SMALL, gguf_types=["Q3_K_S"], mlx_bits=[], imatrix_file=matrix)[1]
    assert given.details["imatrix"]["tool"] == "given" and given.details["imatrix"]["sha256"] == record["sha256"]
