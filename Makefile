# APAM harness. `make reproduce` and `make test` install what is missing first (virtual env, packages, data).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# exact versions and hashes of every package (dev and launcher extras included); `make lock` regenerates it
LOCK := requirements-lock.txt
PROFILE ?= quick
# simulated-clock jobs run side by side up to JOBS at a time (wall-clock jobs always alone); default: the cores
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
# quick writes the committed reference results under results/; other profiles write beside it
RESULTS ?= $(if $(filter quick,$(PROFILE)),results,results-$(PROFILE))
FORCE ?= 0
EXTENDED ?= 0
# a flag is 0 or 1: FORCE=yes was silently no force
$(foreach flag,FORCE EXTENDED,$(if $(filter-out 0 1,$($(flag))),$(error $(flag)=$($(flag)): must be 0 or 1)))
# the suite runs on one pytest-xdist worker per core (-n auto); PYTEST_ARGS="-n 0" runs it in this process alone
PYTEST_ARGS ?=
# a value as one shell word: RESULTS="my results" was two arguments, and RESULTS="x --force" slipped in an option
quote = '$(subst ','\'',$(1))'

.PHONY: help venv lock data test test-all lint reproduce plots calibrate bench clean

help:
	@echo "make reproduce [PROFILE=smoke|quick|long|paper] [FORCE=1] [JOBS=N] [EXTENDED=1]   every experiment, figures, $(RESULTS)/REPORT.md"
	@echo "make test                                              install what is missing, run the test suite"
	@echo "make test-all                                          also the slow tests"
	@echo "make lock [UPGRADE=1]                                  regenerate $(LOCK) from pyproject.toml (pip-compile)"
	@echo "make lint                                              ruff check: the lint rules of pyproject.toml"
	@echo "make data | calibrate | plots | bench | clean"

# The venv holds exactly the lock: its packages at their versions and hashes (pip refuses any other file), nothing
# else (pip-sync removes the rest), then the project itself without dependencies. Rebuilt when the lock or
# pyproject.toml changes. pip-tools runs as `python -m piptools` of this venv: its bin/ scripts name the python of the
# folder they were made in, so in a copied venv they would change the original. The lock is made for CPython 3.11 on Linux x86_64 (this machine's kind).
$(STAMP): $(LOCK) pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r $(LOCK)
	$(PY) -m piptools sync --quiet $(LOCK)
	PYTHONWARNINGS=ignore $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $(STAMP)

venv: $(STAMP)

# pyproject.toml is the loose spec; the lock pins what it resolves to (pip-compile of pip-tools, locked itself in the
# dev extra). Existing pins are kept where they still fit; UPGRADE=1 takes the newest versions. Takes minutes.
lock: $(STAMP)
	CUSTOM_COMPILE_COMMAND="make lock" $(PY) -m piptools compile --quiet --generate-hashes --allow-unsafe \
	    --strip-extras --no-emit-index-url --no-emit-find-links --extra dev --extra launchers \
	    --build-deps-for wheel --build-deps-for editable $(if $(filter 1,$(UPGRADE)),--upgrade,) \
	    --output-file $(LOCK) pyproject.toml

data: $(STAMP)
	$(PY) -m problems.data fashion_mnist

# Tests stage the real data when they can (tests that need it skip, saying why, when it cannot be had).
test: $(STAMP)
	@$(PY) -m problems.data fashion_mnist || echo "warning: Fashion-MNIST not staged; tests that need it will skip"
	$(PY) -m pytest -n auto -m "not slow" $(PYTEST_ARGS)

test-all: $(STAMP)
	@$(PY) -m problems.data fashion_mnist || echo "warning: Fashion-MNIST not staged; tests that need it will skip"
	$(PY) -m pytest -n auto $(PYTEST_ARGS)

# the rules and the format live in pyproject.toml ([tool.ruff]); CI runs both checks (`ruff format .` fixes the format)
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

calibrate: $(STAMP) data
	$(PY) -m experiments.calibrate --profile $(call quote,$(PROFILE)) $(if $(filter 1,$(FORCE)),--force,)

reproduce: $(STAMP) data
	$(PY) -m experiments.reproduce --profile $(call quote,$(PROFILE)) --results-dir $(call quote,$(RESULTS)) --jobs $(call quote,$(JOBS)) $(if $(filter 1,$(FORCE)),--force,) $(if $(filter 1,$(EXTENDED)),--extended,)

plots: $(STAMP)
	$(PY) -m plots $(call quote,$(RESULTS)) --paper-dir results/paper

bench: $(STAMP) data
	@mkdir -p benchmarks/results
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf results-smoke results-paper outputs multirun .pytest_cache benchmarks/results
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
