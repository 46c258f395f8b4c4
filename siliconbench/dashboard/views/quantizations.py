"""Quantizations: every format of a model on both engines, by speed, size and closeness to full precision."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from siliconbench.coordinator.reports.quant_matrix import matrix_rows
from siliconbench.dashboard import data
from siliconbench.dashboard.quant_plot import frontier_chart

st.title("Quantizations")
st.caption(
    "Run examples/quant-matrix.yaml (perplexity with KL-divergence and generate, every format of a model) "
    "and pick its sweep. ◆ marks the formats no other beats on both size and KL-divergence: the ones to "
    "choose from."
)

by_model = matrix_rows(data.picked_sweep_records("q_sweep"))
if not any(r.kld or r.perplexity for rows in by_model.values() for r in rows):
    st.info(
        "This sweep has no perplexity jobs: a quantization table needs a perplexity workload "
        "(kl_divergence: true) beside generate."
    )
    st.stop()
for model, rows in by_model.items():
    st.subheader(model)
    engines = [e for e in ("llama.cpp", "mlx") if any(e in r.kld for r in rows)]
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "format": r.format,
                    "engine": r.engine,
                    "bits/weight": r.bits_per_weight,
                    "size MiB": r.size_bytes and r.size_bytes / 2**20,
                    "perplexity": r.perplexity,
                    **{f"KLD vs {e} base": r.kld.get(e) for e in engines},
                    "KLD p99": r.kld_p99,
                    "same top %": r.same_top_pct.get(r.engine),
                    "prefill tok/s": r.prefill_tps,
                    "decode tok/s": r.decode_tps,
                    "peak MiB": r.peak_memory_bytes and r.peak_memory_bytes / 2**20,
                    "frontier": "◆" if r.frontier else "",
                }
                for r in rows
            ]
        ),
        hide_index=True,
        width="stretch",
        key=f"matrix_{model}",
    )
    if any(r.kld for r in rows):
        st.altair_chart(frontier_chart(model, rows), key=f"frontier_{model}")
