"""Workloads: what a job does with a loaded engine. Each returns raw samples, nothing aggregated."""
