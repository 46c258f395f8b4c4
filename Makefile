# The two set-up commands of the README. Each bootstraps the environment first (idempotent).
VENV ?= .venv
SB := $(VENV)/bin/siliconbench

.PHONY: quickstart test bootstrap models

bootstrap:
	@scripts/bootstrap.sh

models: bootstrap
	@$(SB) models make-tiny --if-missing  # where the CLI and the dashboard look: SILICONBENCH_MODELS_DIR or <data dir>/models

## Run the quickstart sweep on the embedded default (SQLite, in-process) and print the results.
quickstart: models
	$(SB) run examples/quickstart.yaml

## Run the whole test suite against real engines, real PostgreSQL and Redis, real worker processes.
## Two parts, both always run: the tests marked `solo` (they measure speed or need the machine otherwise idle)
## one after another, then the rest in TEST_WORKERS processes (pytest-xdist, --dist loadfile: a test file's tests
## run in one process, so what a module keeps to itself, its Redis database number and its module-scoped fixtures,
## is never shared by two; most of those tests wait on real workers, brokers and outages rather than on the CPU).
## Not loadgroup: with pytest 9.2 it silently stops grouping (pytest-dev/pytest-xdist#1386). --no-loadscope-reorder
## keeps tests/conftest.py's order (the longest files first): xdist would otherwise start files with the most tests first.
## OMP_WAIT_POLICY=PASSIVE in the parallel part only: there three test processes share two cores, and llama.cpp's
## threads, waiting at OpenMP's barrier, spun through the time slices of a descheduled partner (a tiny model's
## llama-bench job: 0.3-3.2 CPU s spinning, 0.1 s sleeping). The solo part keeps the default, which its timed tests
## measure; each result records the policy it ran under (engine_options.openmp), so the two are never pooled.
## Exit 5 of a part means its
## selection was empty (PYTEST_ARGS naming files of one kind only), not a failure.
TEST_WORKERS ?= 3
test: bootstrap
	@scripts/test_deps.sh
	@scripts/services.sh
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@# Byte-compiled here because PYTHONDONTWRITEBYTECODE may be set (it is on this machine and CI): each of the
	@# suite's thousands of Python processes (job children, CLI calls, workers) would compile our modules again,
	@# ~0.2 s of a CLI call's 1 s; only changed files are compiled again (docs/setup.md, make test's time).
	@$(VENV)/bin/python -m compileall -q -j 0 siliconbench harness tests benchmarks > /dev/null
	@status=0; \
	$(VENV)/bin/python -m pytest -m "solo and not gpu" $(PYTEST_ARGS) || { s=$$?; [ $$s -eq 5 ] || status=$$s; }; \
	OMP_WAIT_POLICY=PASSIVE $(VENV)/bin/python -m pytest -m "not solo and not gpu" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS) \
	  || { s=$$?; [ $$s -eq 5 ] || status=$$s; }; \
	exit $$status
