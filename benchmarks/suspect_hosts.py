"""Does suspect-host detection catch a throttled worker, and leave the healthy one alone? Real processes.

Each run starts a fresh PostgreSQL database, a private Redis and two real `siliconbench worker` processes on
this machine, each on its own worker login: one healthy, one slowed by a real busy-wait inside the engine's
timed calls (harness/throttle/sitecustomize.py, SILICONBENCH_THROTTLE). Both register the same facts, so
the same SKU. A sweep with ``placement: each`` runs the same llama.cpp jobs (the tiny model, several fresh
processes a configuration) on both, one sweep a round, so each round's processes ran side by side and the
test pairs them (``siliconbench.coordinator.fleet.suspects``: Wilcoxon signed-rank on the rounds' ratios);
``siliconbench.coordinator.fleet.peers.suspect_hosts`` then judges each against the other.
Printed: per run each worker's ratio vs its peer per series, who was flagged; at the end the detection rate
(throttled flagged / runs) and the false-flag rate (healthy flagged / runs), with 95% Wilson intervals.

    python benchmarks/suspect_hosts.py --runs 10
"""

from __future__ import annotations

import math
import re
import sys
import tempfile
import time
from pathlib import Path

import typer
from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `python benchmarks/suspect_hosts.py`, as every benchmark runs

from harness.peer_scenario import METRIC, models_folder, scenario  # noqa: E402


def _lengths(label: str) -> str:
    m = re.search(r"tg\d+(?: @ d\d+)?", label)
    return m.group(0) if m else label


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if not n:
        return 0.0, 1.0
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, mid - half), min(1.0, mid + half)


def main(
    runs: int = typer.Option(5, help="Scenarios to run"),
    throttle: float = typer.Option(0.10, help="The slow worker's timed calls take (1 + this) x as long"),
    processes: int = typer.Option(8, help="Rounds: fresh processes per configuration on each worker"),
    gen: str = typer.Option("128,256,512", help="Generated tokens: one decode series each"),
    repetitions: int = typer.Option(3, help="Measured repetitions inside each process"),
    models_dir: Path | None = typer.Option(None, help="A folder holding tiny-llama-5m (else made)"),
) -> None:
    console = Console()
    mdir = models_folder(models_dir)
    log_dir = Path(tempfile.mkdtemp(prefix="sb-suspect-logs-"))
    caught = false = caught_unpaired = false_unpaired = 0
    t0 = time.monotonic()
    for i in range(1, runs + 1):
        r = scenario(
            mdir,
            log_dir,
            throttle=throttle,
            processes=processes,
            repetitions=repetitions,
            gen=tuple(int(g) for g in gen.split(",")),
        )
        caught += r["throttled"] in r["flagged"]
        false += r["healthy"] in r["flagged"]
        caught_unpaired += r["throttled"] in r["flagged_unpaired"]
        false_unpaired += r["healthy"] in r["flagged_unpaired"]
        cells = [
            f"{'slow' if t.host == r['throttled'] else 'ok'} {_lengths(t.series)} {t.ratio:.3f} p {t.p_value:.2g}"
            for t in sorted(r["tests"], key=lambda t: (t.host, t.series))
        ]
        console.print(
            f"run {i}/{runs} ({r['wall_s']:.0f} s): flagged {r['flagged'] or 'none'} (unpaired: "
            f"{r['flagged_unpaired'] or 'none'}); " + "; ".join(cells)
        )
    lo, hi = wilson(caught, runs)
    flo, fhi = wilson(false, runs)
    console.print(
        f"\n{runs} runs in {time.monotonic() - t0:.0f} s, throttle {throttle:g} ({1 - 1 / (1 + throttle):.1%} "
        f"slower), {processes} processes a configuration a worker, metric {METRIC}, logs {log_dir}"
    )
    console.print(
        f"detection: {caught}/{runs} = {caught / runs:.0%} (95% {lo:.0%}–{hi:.0%}); "
        f"false flags: {false}/{runs} = {false / runs:.0%} (95% {flo:.0%}–{fhi:.0%})"
    )
    ulo, uhi = wilson(caught_unpaired, runs)
    console.print(
        f"the same processes unpaired (Mann-Whitney, as if no rounds): detection {caught_unpaired}/{runs} "
        f"= {caught_unpaired / runs:.0%} (95% {ulo:.0%}–{uhi:.0%}); false flags {false_unpaired}/{runs}"
    )


if __name__ == "__main__":
    typer.run(main)
