"""The machine a result was measured on: hardware, OS and Python, read once per child process through
the platform seam (siliconbench.worker.platform); kept as the name the workloads, registration and coordinator import."""

from __future__ import annotations

from functools import lru_cache

from siliconbench.worker.platform import current


@lru_cache(maxsize=1)
def host_facts() -> dict:
    """hostname, os, os_version, chip, cores, memory_bytes, machine, python, and host_details: a dict of
    the platform's own identity facts (on a Mac: hw.model, P/E and GPU cores, Metal, wired limit, build,
    Rosetta)."""
    return current().host_facts()
