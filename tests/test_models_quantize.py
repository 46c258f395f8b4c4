"""`models quantize`: more forms of a model made by the engines' own quantizers, each at its level, checked."""

from __future__ import annotations

import os
import shutil

import pytest

from siliconbench.errors import UserError
from siliconbench.jobs import expand
from siliconbench.manifest import ModelCatalog, sha256_path
from siliconbench.spec import parse_sweep
from worker.models.quantize import quantize_model

from .conftest import SMALL


@pytest.fixture
def models(tmp_path, models_dir):
    d = tmp_path / "models"
    shutil.copytree(models_dir / SMALL, d / SMALL, copy_function=os.link)  # hard links: no copy
    return d


def test_gguf_types_and_mlx_widths_land_at_their_levels_and_pair_in_a_sweep(models):
    m, new = quantize_model(models, SMALL, gguf_types=["Q6_K", "Q5_K_M", "Q3_K_M"], mlx_bits=[6, 5, 3],
                            recipe="mixed_3_6")
    got = {(a.format, a.quant, a.level) for a in new}
    assert got == {("gguf", "Q6_K", "q6"), ("gguf", "Q5_K_M", "q5"), ("gguf", "Q3_K_M", "q3"),
                   ("mlx", "6bit", "q6"), ("mlx", "5bit", "q5"), ("mlx", "3bit", "q3"), ("mlx", "mixed_3_6", "q3")}
    for a in new:
        assert sha256_path(models / SMALL / a.path) == a.sha256, a.path
        assert a.details["quantized_from"] in ("F32", "f32")
    bpw = {a.quant: a.details["bits_per_weight"] for a in new}
    assert bpw["Q3_K_M"] < bpw["Q5_K_M"] < bpw["Q6_K"] and bpw["3bit"] < bpw["mixed_3_6"] < bpw["5bit"] < bpw["6bit"]
    cat = ModelCatalog(models)
    assert len(cat.get(SMALL).artifacts) == len(m.artifacts)
    jobs = expand(parse_sweep({"name": "q", "models": [SMALL], "quantizations": ["q6", "q5"]}), cat)
    assert {(j.engine, j.quant) for j in jobs} == {("llama.cpp", "Q6_K"), ("mlx", "6bit"), ("llama.cpp", "Q5_K_M"),
                                                   ("mlx", "5bit")}
    again, none = quantize_model(models, SMALL, gguf_types=["Q6_K"], mlx_bits=[6])
    assert none == [] and len(again.artifacts) == len(m.artifacts)  # already there: nothing made twice


@pytest.mark.parametrize("kw, field, needle", [
    ({"gguf_types": ["IQ2_XXS"], "mlx_bits": []}, "--gguf", "importance matrix"),
    ({"gguf_types": ["Q9_Z"], "mlx_bits": []}, "--gguf", "not a type"),
    ({"gguf_types": [], "mlx_bits": [7]}, "--mlx", "7 bits"),
    ({"gguf_types": [], "mlx_bits": [4], "group_size": 48}, "--group-size", "48"),
])
def test_what_the_quantizers_cannot_make_is_refused_before_anything_is_written(models, kw, field, needle):
    before = (models / SMALL / "manifest.json").read_text()
    with pytest.raises(UserError) as e:
        quantize_model(models, SMALL, **kw)
    assert e.value.field == field and needle in e.value.message
    assert (models / SMALL / "manifest.json").read_text() == before
