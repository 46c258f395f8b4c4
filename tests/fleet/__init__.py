"""Real Celery workers, Redis and PostgreSQL: fleet sweeps, fetch, outages, faults, confirmation, campaigns, the scheduler, the watch's whole loop, suspect hosts."""
