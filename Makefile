# The two set-up commands of the README. Each bootstraps the environment first (idempotent).
VENV ?= .venv
SB := $(VENV)/bin/siliconbench
export SILICONBENCH_MODELS_DIR ?= $(CURDIR)/models

.PHONY: quickstart test bootstrap models

bootstrap:
	@scripts/bootstrap.sh

models: bootstrap
	@test -f $(SILICONBENCH_MODELS_DIR)/tiny-llama-30m/manifest.json || $(SB) models make-tiny

## Run the quickstart sweep on the embedded default (SQLite, in-process) and print the results.
quickstart: models
	$(SB) run examples/quickstart.yaml

## Run the whole test suite against real engines, real PostgreSQL and Redis, real worker processes.
test: bootstrap
	@scripts/services.sh
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)
