"""One engine environment of a second, real mlx-lm release, made once and kept across test runs.

It lives in the user's cache (``$SILICONBENCH_TEST_ENVS_DIR``, else ``~/.cache/siliconbench/test-envs``) like the
llama-cpp-python wheel the bootstrap builds, under a key of what pins it (this interpreter and the versions of the
child's own dependencies, ``pip_args.constraints``): a changed pin makes a new one instead of reusing a stale one.
``siliconbench.worker.envs.venvs.add`` is idempotent (same name, same requirements: returned as it is), so only the first run
of a machine pays the install (~20 s).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from siliconbench.worker.envs import venvs as envs
from siliconbench.worker.envs.pip_args import constraints
from tests.kept import kept_dir

OTHER_MLX_LM = "0.31.3"  # a real release before the one the project pins (0.32.2)


def envs_root() -> Path:
    key = hashlib.sha256(f"{sys.executable}\n{sys.version}\n{constraints()}".encode()).hexdigest()[:12]
    return kept_dir("test-envs", "SILICONBENCH_TEST_ENVS_DIR") / key


def mlx_env() -> envs.EngineEnv:
    return envs.add(f"mlx-lm=={OTHER_MLX_LM}", root=envs_root())
