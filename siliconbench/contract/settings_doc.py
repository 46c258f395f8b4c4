"""docs/settings.md's settings table, generated from Settings: `python -m siliconbench.contract.settings_doc`."""

from __future__ import annotations

from .settings import Settings


def markdown_table() -> str:
    rows = ["| variable | meaning | default |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = "unset" if field.default in (None, "") else f"`{field.default}`"
        rows.append(f"| `SILICONBENCH_{name.upper()}` | {field.description} | {default} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
