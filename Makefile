# Every target sets up .venv on first use, so a fresh machine needs only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: all test stress scenarios lint clean check selftest bench soak sweep

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

stress: $(STAMP)
	$(BIN)/takeover stress

scenarios: $(STAMP)
	$(BIN)/takeover scenarios

selftest: $(STAMP)
	$(BIN)/takeover selftest

lint: $(STAMP)
	$(BIN)/ruff check harness workloads reports tests

clean:
	rm -rf $(VENV) runs build *.egg-info .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
