"""Every benchmark script at its smallest size (a smoke run that keeps its command working)."""
