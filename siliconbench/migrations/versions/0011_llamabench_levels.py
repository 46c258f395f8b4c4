"""Imported llama-bench rows get the one level rule: Q6_K is q6 (was q8), Q5_K_M q5 (was q5_k_m), Q3_K_M q3 ...

siliconbench/coordinator/reports/llamabench.py had its own level function, which disagreed with siliconbench.contract.manifest.level_of:
Q6_K was filed under q8 and Q5_K_M under 'q5_k_m', so an imported llama-bench result never paired with a native
one at its level. The import now uses the manifest's rule; this corrects the rows stored before, in jobs.quant_level
and in the job spec JSON. Only rows the old function wrote are touched: imports without a model (their digest is
'llama-bench:...'), whose level was never read from a manifest.

The rule is frozen here as it was at 0011 (siliconbench.contract.manifest.weight_dtype and level_of then), so a later change
to the live code cannot change what this upgrade does. The downgrade restores the old function's values.

Revision ID: 0011
Revises: 0010
"""

import json
import re
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: Union[str, Sequence[str], None] = "0010"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

FLOATS = {
    "f32": "f32",
    "fp32": "f32",
    "float32": "f32",
    "f16": "f16",
    "fp16": "f16",
    "float16": "f16",
    "half": "f16",
    "bf16": "bf16",
    "bfloat16": "bf16",
}


def _dtype(quant: str) -> str:
    q = (quant or "").strip().lower()
    q = re.sub(r"\s*\(guessed\)$", "", q).removeprefix("all ").removeprefix("mostly ").strip()
    if q in FLOATS:
        return FLOATS[q]
    if m := re.fullmatch(r"(\d+)[-_ ]?bits?", q):
        return f"q{m.group(1)}"
    if m := re.match(r"(?:i|t)?q(\d+)(?:[_ ]|$)", q):
        return f"q{m.group(1)}"
    return q


def new_level(quant: str) -> str:
    """level_of(quant) or weight_dtype(quant): a level, else the type's own dtype name (it pairs only with itself)."""
    d = _dtype(quant)
    return "full" if d in ("f32", "f16", "bf16") else d


def old_level(quant: str) -> str:
    q = quant.upper()
    if q in ("F16", "F32", "BF16"):
        return "full"
    if q.startswith(("Q8", "Q6")):
        return "q8"
    if q.startswith(("Q4", "IQ4")):
        return "q4"
    return q.lower()


def _rewrite(level_of) -> None:
    bind = op.get_bind()
    rows = bind.execute(
        sa.text("SELECT id, quant, quant_level, spec FROM jobs WHERE model_sha256 LIKE 'llama-bench:%'")
    )
    for job_id, quant, level, spec in rows.fetchall():
        want = level_of(quant)
        if want == level:
            continue
        spec = json.loads(spec) if isinstance(spec, str) else dict(spec or {})
        spec["quant_level"] = want
        update = sa.text("UPDATE jobs SET quant_level = :level, spec = :spec WHERE id = :id").bindparams(
            sa.bindparam("spec", type_=sa.JSON)
        )
        bind.execute(update, {"level": want, "spec": spec, "id": job_id})


def upgrade() -> None:
    _rewrite(new_level)


def downgrade() -> None:
    _rewrite(old_level)
