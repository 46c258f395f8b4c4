"""One job's life in a fresh child process: the parent's side (``child``: JSON over a pipe, a hard timeout,
a crash becomes a result), the child's entry point (``child_main``) and ``perform_job``, the one way a job
runs whoever asks (the fleet worker, the embedded run, confirm). May import: engines, workloads, measure,
platform, envs, models, siliconbench; never the Celery runtime, the broker or the database.
"""
