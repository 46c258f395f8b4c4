"""The metric registry as a Markdown table, for docs/metrics.md (`python -m siliconbench.contract.metrics_doc`)."""

from __future__ import annotations

from .metrics import METRICS


def markdown_table() -> str:
    rows = ["| metric | unit | better | one value per | timed region / definition |", "|---|---|---|---|---|"]
    for m in METRICS.values():
        rows.append(f"| `{m.name}` | {m.unit} | {m.better} | {m.scope} | {m.region.replace('|', '/')} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
