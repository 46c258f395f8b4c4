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
test: bootstrap
	@scripts/test_deps.sh
	@scripts/services.sh
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)
