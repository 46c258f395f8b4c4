"""One machine's worker: the child process, engines and workloads on the tiny model, gates, platform facts, the service, engine environments, GPU."""
