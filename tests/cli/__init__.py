"""The siliconbench command: the embedded run, workload tables, recovering half-done sweeps."""
