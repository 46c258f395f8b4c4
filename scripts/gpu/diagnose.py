"""Why a llama.cpp job's child crashes on CUDA where a plain process does not: the same model loaded under each
piece of the job child's set-up in turn, each in a fresh process, and the real child under cuda-gdb for a native
backtrace. python3 scripts/gpu/diagnose.py GGUF OUT_DIR"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LOAD = (
    "from siliconbench.worker.engines.llama_cpp import LlamaCppEngine; e = LlamaCppEngine(); "
    "e.load(__import__('pathlib').Path({path!r}), {{}}, n_ctx=600); print('LOADED', e.describe()['backend'])"
)
VARIANTS = {
    "plain": "",
    "child imports": "import siliconbench.worker.job.child_main",
    "nvml first": "from siliconbench.worker.platform.nvidia import Nvml; Nvml.open()",
    "device meter thread": "from siliconbench.worker.platform.nvidia import Nvml, DeviceMeter; DeviceMeter(Nvml.open()).start()",
    "faulthandler + tee": "import faulthandler; from siliconbench.worker.engines import engine_log; engine_log.tee_to_stderr(); "
    "faulthandler.enable(file=engine_log.stream())",
    "stdout is stderr": "import sys; sys.stdout = sys.stderr",
    "watcher thread": "import threading, time; threading.Thread(target=lambda: [time.sleep(0.5) for _ in iter(int, 1)], daemon=True).start()",
}


def run(code: str, **kw) -> tuple[int, str]:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **kw)
    return p.returncode, (p.stdout + p.stderr)[-1500:]


def main(gguf: str, out: str) -> None:
    report = {}
    for name, pre in VARIANTS.items():
        report[name] = run(f"{pre}\n{LOAD.format(path=gguf)}")
        print(name, report[name][0], flush=True)
    with open(os.devnull, "rb") as devnull, open(Path(out) / "diag-file-stdio.txt", "w") as f:
        p = subprocess.run(
            [sys.executable, "-c", LOAD.format(path=gguf)],
            stdin=devnull,
            stdout=f,
            stderr=f,
            start_new_session=True,
            timeout=120,
        )
        report["new session, stdio to a file"] = (p.returncode, "")
        print("new session, stdio to a file", p.returncode, flush=True)
    (Path(out) / "diagnose.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
