"""The coordinator's statistics and reports on stored results: compare, regressions, the sequential design, estimates, llama-bench interop, reports, the watch and notifications."""
