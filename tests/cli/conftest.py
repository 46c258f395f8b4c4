"""Fixtures of the llama.cpp-by-commit tests: the real llama.cpp history (harness/llama_repo.py) and a run whose
builds folder is the kept one (built once per machine, every commit after that found there)."""

from __future__ import annotations

import pytest

from harness.llama_repo import BUILDS, make_repo


@pytest.fixture(scope="module")
def repo():
    return make_repo()


@pytest.fixture
def env(isolated_env, monkeypatch):
    """isolated_env, with SILICONBENCH_BUILDS_DIR at the kept builds."""
    monkeypatch.setenv("SILICONBENCH_BUILDS_DIR", str(BUILDS))
    return isolated_env
