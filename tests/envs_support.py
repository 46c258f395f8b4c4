"""One engine environment of a second, real mlx-lm release for the whole test session.

Each test module that needs it has its own session fixture calling ``mlx_env``; ``worker.envs.venvs.add`` is
idempotent (same name, same requirements: returned as it is), so the install (~20 s) happens once.
"""

from __future__ import annotations

from worker.envs import venvs as envs

OTHER_MLX_LM = "0.31.3"  # a real release before the one the project pins (0.32.2)


def mlx_env(tmp_path_factory) -> envs.EngineEnv:
    root = tmp_path_factory.getbasetemp() / "engine-envs"
    return envs.add(f"mlx-lm=={OTHER_MLX_LM}", root=root)
