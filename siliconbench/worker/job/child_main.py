"""Entry point of a job's fresh child process: `python -m siliconbench.worker.job.child_main FD`.

Reads the JobSpec as JSON on stdin, runs it, and writes JSON lines to file descriptor FD: progress
events, then one {"event": "result"} line. Anything the engines print goes to stderr, which the
parent keeps the tail of. Peak RSS is this process's own: it ran nothing else.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from siliconbench.contract.jobs import JobSpec

from siliconbench.worker.engines import engine_log
from siliconbench.worker.serving.process import kill_live_groups
from siliconbench.worker.workloads import remove_scratch, run_workload


def _die_with_parent() -> None:
    """Exit if the worker that started us dies (kill -9 leaves no one to kill our process group).

    A thread, not the kernel's parent-death signal: a signal's Python handler waits for the engine's native call
    to return (minutes of a long prefill), and SIGKILL would leave the servers a workload started."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                kill_live_groups()  # servers a workload started must not outlive the job either
                remove_scratch()  # nor its folder
                os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def main() -> int:
    # A crash inside an engine (a native fault) still leaves a Python traceback and the engine's last log lines
    # in stderr, whose tail the runner keeps: both go to a copy of fd 2, because llama-cpp-python points fd 2 at
    # /dev/null while a model loads. (stdout is that same file already: the result goes to its own pipe.)
    engine_log.tee_to_stderr()
    faulthandler.enable(file=engine_log.stream(), all_threads=True)
    _die_with_parent()
    out = os.fdopen(int(sys.argv[1]), "w", buffering=1)

    def emit(event: str, **payload) -> None:
        out.write(json.dumps({"event": event, **payload}) + "\n")

    emit("started", pid=os.getpid())
    try:
        return _run(emit)
    except Exception as exc:  # reported to the parent as a failed result, with the traceback on stderr
        traceback.print_exc()
        emit("error", error=f"{type(exc).__name__}: {exc}")
        return 1
    finally:
        out.close()


def _run(emit) -> int:
    job = JobSpec.model_validate_json(sys.stdin.read())
    result = run_workload(job, Path(os.environ["SILICONBENCH_MODELS_DIR"]), emit)
    emit("result", result=json.loads(result.model_dump_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
