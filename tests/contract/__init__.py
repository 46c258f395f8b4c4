"""The shared contract (siliconbench/): sweep and workload specs, jobs and their expansion."""
