# Every target sets up .venv on first use, so a fresh machine needs only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# Extra options for the command behind a target, e.g. `make stress ARGS="--seed 7 --workers 8"`.
ARGS ?=
RUN ?= runs/latest
SOAK_MINUTES ?= 60

.PHONY: all test stress scenarios lint clean check selftest bench soak sweep

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# The editable install maps harness/, reports/ and workloads/ into the one package `takeover`
	# through an import hook; setuptools warns about that hook on every install, which is noise here.
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

stress: $(STAMP)
	$(BIN)/takeover stress $(ARGS)

scenarios: $(STAMP)
	$(BIN)/takeover scenarios $(ARGS)

check: $(STAMP)
	$(BIN)/takeover check $(RUN) $(ARGS)

selftest: $(STAMP)
	$(BIN)/takeover selftest $(ARGS)

sweep: $(STAMP)
	$(BIN)/takeover sweep $(ARGS)

soak: $(STAMP)
	$(BIN)/takeover soak --minutes $(SOAK_MINUTES) $(ARGS)

bench: $(STAMP)
	$(BIN)/takeover bench $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check harness workloads reports tests

clean:
	rm -rf $(VENV) runs build *.egg-info .pytest_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
