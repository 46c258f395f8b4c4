"""The worker: runs benchmark jobs on this machine, each in a fresh child process. Rooms: `job/` (one job's life), `runtime/`
(the worker process: Celery, heartbeats, doctor), `engines/`, `workloads/`, `measure/`, `quality/`, `models/`, `envs/`,
`platform/` (the OS seam and host facts), `serving/` (the engines' own servers), `service/` (the worker as an OS service).
"""

from siliconbench.worker.engines.native import preload_cxx_runtime

# Before any module of this package can load an engine's native library (llama.cpp through llama-cpp-python):
# see siliconbench/worker/engines/native.py for the crash this prevents on CUDA builds.
preload_cxx_runtime()
