# APAM harness. `make reproduce` and `make test` install what is missing first (virtual env, packages, data).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PROFILE ?= quick
# quick writes the committed reference results under results/; other profiles write beside it
RESULTS ?= $(if $(filter quick,$(PROFILE)),results,results-$(PROFILE))
FORCE ?= 0
PYTEST_ARGS ?=

.PHONY: help venv data test test-all reproduce plots calibrate bench clean

help:
	@echo "make reproduce [PROFILE=smoke|quick|long|paper] [FORCE=1]   every experiment, figures, $(RESULTS)/REPORT.md"
	@echo "make test                                              install what is missing, run the test suite"
	@echo "make test-all                                          also the slow tests"
	@echo "make data | calibrate | plots | bench | clean"

# The venv is built once and rebuilt when pyproject.toml changes.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

data: $(STAMP)
	$(PY) -m problems.data fashion_mnist

# Tests stage the real data when they can (tests that need it skip, saying why, when it cannot be had).
test: $(STAMP)
	@$(PY) -m problems.data fashion_mnist || echo "warning: Fashion-MNIST not staged; tests that need it will skip"
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: $(STAMP)
	@$(PY) -m problems.data fashion_mnist || echo "warning: Fashion-MNIST not staged; tests that need it will skip"
	$(PY) -m pytest $(PYTEST_ARGS)

calibrate: $(STAMP) data
	$(PY) -m experiments.calibrate --profile $(PROFILE) --results-dir $(RESULTS) $(if $(filter 1,$(FORCE)),--force,)

reproduce: $(STAMP) data
	$(PY) -m experiments.reproduce --profile $(PROFILE) --results-dir $(RESULTS) $(if $(filter 1,$(FORCE)),--force,)

plots: $(STAMP)
	$(PY) -m plots $(RESULTS) --paper-dir results/paper

bench: $(STAMP) data
	@mkdir -p benchmarks/results
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf results-smoke results-paper outputs multirun .pytest_cache benchmarks/results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
