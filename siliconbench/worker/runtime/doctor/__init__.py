"""What a worker on this machine would see, each fact a check with what to fix (`siliconbench doctor`).

``check`` is one check's shape; ``machine`` checks this Mac (host facts, the engines and their backend, Metal,
models, sleep prevention, the service, thermal state and power); ``connections`` checks the broker and the
database a worker would use. ``run_checks`` runs them all in the order printed.
"""

from __future__ import annotations

import platform
from pathlib import Path

from siliconbench.worker.runtime.doctor.check import Check, Status
from siliconbench.worker.runtime.doctor.connections import check_broker, check_database
from siliconbench.worker.runtime.doctor.machine import (
    check_engines,
    check_host,
    check_models,
    check_platform,
    check_service,
    check_sleep,
)

__all__ = [
    "Check",
    "Status",
    "check_broker",
    "check_database",
    "check_engines",
    "check_host",
    "check_models",
    "check_platform",
    "check_service",
    "check_sleep",
    "run_checks",
]


def run_checks(
    *,
    broker_url: str | None,
    database_url: str | None,
    models_dir: Path,
    timeout_s: float = 3.0,
    system: str | None = None,
) -> list[Check]:
    """Every check, in the order printed."""
    system = system or platform.system()
    return [
        *check_host(system),
        *check_engines(system),
        *check_models(models_dir),
        *check_sleep(system),
        *check_platform(),
        *check_service(system),
        *check_broker(broker_url, timeout_s),
        *check_database(database_url, timeout_s),
    ]
