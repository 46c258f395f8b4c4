"""The checks of this machine: host facts, the engines and the backend each would run on (probed in a fresh
interpreter, as a job's child is), Metal, the models folder, sleep prevention, the service, thermal state and power.
On Linux no Metal is expected and is not a failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from siliconbench.contract.engines import describe
from siliconbench.contract.manifest import ModelCatalog

from siliconbench import import_root
from siliconbench.worker import platform as host_platform
from siliconbench.worker.engines import engine_class, installed_engines
from siliconbench.worker.platform.host_facts import host_facts
from siliconbench.worker.runtime.doctor.check import Check, Status
from siliconbench.worker.service import installed, sleep_method

PROBE_TIMEOUT_S = 120  # importing an engine, cold, on a slow disk
_HOST_KEYS = ("hostname", "chip", "cores", "memory_bytes", "os_version", "machine", "python", "os")


# ------------------------------------------------------------------------------------------------ host


def _rosetta() -> bool:
    try:
        out = subprocess.run(["sysctl", "-n", "sysctl.proc_translated"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() == "1"
    except (OSError, subprocess.SubprocessError):
        return False


def check_host(system: str) -> list[Check]:
    f = host_facts()
    detail = (
        f"{f['hostname']} · {f['chip']} · {f['cores']} cores · {f['memory_bytes'] / 2**30:.1f} GiB · "
        f"{f['os_version']} · {f['machine']} · Python {f['python']}"
    )
    extra = {k: v for k, v in f.items() if k not in _HOST_KEYS}
    if extra:
        detail += " · " + ", ".join(f"{k}={v}" for k, v in extra.items())
    if system == "Darwin" and (f["machine"] != "arm64" or _rosetta()):
        return [
            Check(
                "host",
                Status.fail,
                detail + " (not native arm64: Rosetta or an Intel Python)",
                "install a native arm64 Python 3.11+ (python.org, or Homebrew under /opt/homebrew) and "
                "reinstall siliconbench with it: no mlx wheel exists for x86_64 and llama.cpp gets no Metal",
            )
        ]
    return [Check("host", Status.ok, detail)]


# --------------------------------------------------------------------------------------------- engines

_PROBE = "import json, sys; from siliconbench.worker.runtime.doctor.machine import probe_engine; print(json.dumps(probe_engine(sys.argv[1])))"


def probe_engine(name: str) -> dict:
    """The backend an engine would use here (run in a fresh interpreter: it imports the engine)."""
    return engine_class(name).probe()


def probe_in_fresh_interpreter(name: str) -> tuple[dict | None, str]:
    """(probe_engine's answer, "") from a new interpreter, or (None, why it failed)."""
    try:
        r = subprocess.run(
            [sys.executable, "-c", _PROBE, name],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            cwd=import_root(),
        )
    except subprocess.TimeoutExpired:
        return None, f"importing it took over {PROBE_TIMEOUT_S} s"
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        return None, tail
    return json.loads(r.stdout.strip().splitlines()[-1]), ""


_METAL_FIX = {
    "llama.cpp": "reinstall llama-cpp-python with Metal, natively on arm64: "
    "CMAKE_ARGS='-DGGML_METAL=on' pip install --force-reinstall --no-cache-dir llama-cpp-python",
    "mlx": "install mlx with a native arm64 Python (`pip install mlx mlx-lm`): "
    "an x86_64 or Rosetta Python gets no Metal",
}


def check_engines(system: str) -> list[Check]:
    found = installed_engines()
    if not found:
        return [
            Check(
                "engines",
                Status.fail,
                "neither llama.cpp nor MLX is installed",
                "pip install 'siliconbench[llamacpp,mlx]' (or scripts/bootstrap.sh)",
            )
        ]
    checks, gpu = [], {}
    for name in found:
        probe, why = probe_in_fresh_interpreter(name)
        if probe is None:
            packages = " ".join(describe(name).pinned)
            checks.append(
                Check(
                    name,
                    Status.fail,
                    f"{name} {found[name]} is installed but does not load: {why}",
                    f"reinstall it: pip install --force-reinstall {packages}",
                )
            )
            continue
        gpu[name] = probe["backend"]
        build = probe.get("build", "")
        gpu_name = f" · {probe['gpu']}" if probe.get("gpu") else ""
        checks.append(Check(name, Status.ok, f"{probe['version']} · backend {probe['backend']} · {build}{gpu_name}"))
    if system == "Darwin":
        missing = [n for n, b in gpu.items() if b != "Metal"]
        if missing:
            checks.append(
                Check(
                    "metal",
                    Status.fail,
                    f"no Metal for {', '.join(missing)}: it would run on the CPU",
                    "; ".join(_METAL_FIX[n] for n in missing),
                )
            )
        elif gpu:
            checks.append(Check("metal", Status.ok, f"Metal for {', '.join(gpu)}"))
    elif gpu:
        runs = ", ".join(f"{n} runs on {b}" for n, b in gpu.items())
        checks.append(Check("metal", Status.info, f"Metal exists only on macOS: {runs} here"))
    return checks


# ------------------------------------------------------------------------------------ models, service


def check_models(models_dir: Path) -> list[Check]:
    try:
        names = ModelCatalog(models_dir).names()
    except Exception as exc:  # a broken manifest: the worker would fail to register
        return [
            Check(
                "models",
                Status.fail,
                f"{models_dir}: {exc}".splitlines()[0],
                "fix or remove that model's manifest.json",
            )
        ]
    if not names:
        return [
            Check(
                "models",
                Status.fail,
                f"no models in {models_dir}: the worker could take no job",
                "siliconbench models make-tiny (or add-smollm2), or pass --models-dir / SILICONBENCH_MODELS_DIR",
            )
        ]
    return [Check("models", Status.ok, f"{len(names)} in {models_dir}: {', '.join(names)}")]


def check_sleep(system: str) -> list[Check]:
    method, why = sleep_method(system)
    if method != "none":
        return [Check("sleep", Status.ok, f"held while a job runs: {method}")]
    if system == "Darwin":
        return [
            Check(
                "sleep", Status.fail, f"no sleep prevention: {why}", "caffeinate is part of macOS: put /usr/bin on PATH"
            )
        ]
    return [Check("sleep", Status.info, f"no sleep prevention: {why}")]


def check_service(system: str) -> list[Check]:
    path = installed(system)
    if path:
        return [Check("service", Status.ok, f"installed: {path}")]
    return [
        Check(
            "service",
            Status.info,
            "not installed; to run at login and restart on a crash: "
            "siliconbench worker install --broker URL --database URL",
        )
    ]


def check_platform() -> list[Check]:
    """Thermal state and power as the worker reads them (siliconbench.worker.platform.report)."""
    try:
        rep = host_platform.report()
    except Exception as exc:
        return [
            Check("thermal", Status.fail, f"siliconbench.worker.platform.report() failed: {type(exc).__name__}: {exc}")
        ]
    return [Check("thermal", Status.ok, ", ".join(f"{k}={v}" for k, v in rep.items()))]
