"""The quantization matrix's frontier as a chart: quality against size and speed against size (altair).

Drawn on the dashboard's Quantizations page, and written to an HTML file by ``siliconbench results --plot FILE``
(which runs ``python -m siliconbench.dashboard.quant_plot``: the CLI itself imports no plotting library).
"""

from __future__ import annotations

import argparse

import altair as alt
import pandas as pd

from siliconbench.coordinator.reports.quant_matrix import MatrixRow, matrix_rows, reference_engine


def frontier_chart(model: str, rows: list[MatrixRow]) -> alt.HConcatChart:
    """Mean KLD against size with the frontier's formats joined by a line, and decode speed against size."""
    engine = reference_engine(rows)
    data = pd.DataFrame(
        [
            {
                "format": r.format,
                "engine": r.engine,
                "size MiB": r.size_bytes / 2**20,
                "mean KLD": r.kld.get(engine),
                "decode tok/s": r.decode_tps,
                "frontier": r.frontier,
            }
            for r in rows
            if r.size_bytes
        ]
    )
    base = alt.Chart(data).encode(
        x=alt.X("size MiB:Q", scale=alt.Scale(zero=False)), color="engine:N", tooltip=list(data.columns)
    )
    quality = base.mark_point(size=80, filled=True).encode(
        y=alt.Y("mean KLD:Q", scale=alt.Scale(type="symlog", constant=1e-4), title=f"mean KLD vs {engine} base"),
        shape="frontier:N",
    )
    line = (
        alt.Chart(data[data["frontier"]].sort_values("size MiB"))
        .mark_line(color="gray", strokeDash=[4, 3])
        .encode(x="size MiB:Q", y="mean KLD:Q")
    )
    labels = base.mark_text(align="left", dx=6, fontSize=10).encode(y="mean KLD:Q", text="format:N")
    speed = base.mark_point(size=80, filled=True).encode(y="decode tok/s:Q")
    return alt.hconcat(
        (line + quality + labels).properties(title=f"{model}: quality against size", width=420, height=300),
        speed.properties(title="decode speed against size", width=300, height=300),
    )


def write(records: list[dict], path: str) -> int:
    charts = [frontier_chart(m, rows) for m, rows in matrix_rows(records).items() if any(r.kld for r in rows)]
    if not charts:
        return 0
    alt.vconcat(*charts).save(path)
    return len(charts)


def main() -> None:
    from siliconbench.contract.settings import load_settings

    from siliconbench.coordinator.reports.tables import records_for

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--sweep")
    args = ap.parse_args()
    n = write(records_for(load_settings().resolved_database_url, args.sweep), args.out)
    if not n:
        raise SystemExit("this sweep has no perplexity jobs with kl_divergence: nothing to plot")


if __name__ == "__main__":
    main()
