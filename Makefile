# Every target sets up .venv on first use, so a fresh machine needs only python3 and make. The targets
# that run takeover install what running needs (RUN_STAMP: the package); the test, lint and typecheck
# targets also the test toolchain and the adapters' libraries (TEST_STAMP: '.[test]').
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed
# The Debian packages some tests and runs need (`scripts/system-packages list` names them): installed with apt-get
# when missing and make runs as root; otherwise the tests that need one skip with a line naming it.
SYSTEM_PACKAGES := scripts/system-packages
PYTEST_ARGS ?=
# Test processes: most of the suite's time is real runs waiting on their own clocks (faults, leases,
# drains): two processes kept about 0.9 of CI's 2 cores busy, three about 1.0; four keep both busy
# (tests/README.md, "Four processes"). PYTEST_JOBS=0 runs in one process.
# loadgroup keeps the tests of an xdist_group (one module-scoped run read by several tests) together.
PYTEST_JOBS ?= 4
PYTEST_XDIST := -n $(PYTEST_JOBS) --dist loadgroup
# The nightly tier keeps two: some of its runs are there because a loaded machine can make them miss.
PYTEST_NIGHTLY_JOBS ?= 2
# Extra options for the command behind a target, e.g. `make stress ARGS="--seed 7 --workers 8"`.
ARGS ?=
RUN ?= runs/latest
SOAK_MINUTES ?= 60
# The durations file `make tune` tunes for (the light example unless given).
TASK_TIMES ?= examples/task-times-light.csv

# bash with pipefail, so a recipe that pipes (typecheck) fails when its first command does.
SHELL := bash
.SHELLFLAGS := -o pipefail -c

.PHONY: js arq typecheck all test test-fast test-nightly stress scenarios lint clean check selftest bench soak sweep tune hunt docs reference

# The system packages a run's ARGS need: fuse3 for power losses (--power-loss-rate; sweep's --power-loss
# axis), postgresql for a private server (--db postgres; a postgresql:// URL is the user's own server), iptables
# and iproute2 for a run's hosts (--hosts: their network namespaces, veths and firewall rules), redis-server
# for a private Redis server (--db redis; a redis:// URL is the user's own server).
RUN_PACKAGES = $(if $(findstring --power-loss,$(ARGS)),fuse3) $(if $(filter postgres --db=postgres,$(ARGS)),postgresql) \
	$(if $(filter redis --db=redis,$(ARGS)),redis-server) $(if $(findstring --hosts,$(ARGS)),iptables iproute2)
# Installs them first when there are any (a plain `make stress` needs none and runs nothing here).
SYSTEM_FOR_RUN = $(if $(strip $(RUN_PACKAGES)),$(SYSTEM_PACKAGES) install $(RUN_PACKAGES))

all: test

# The editable install maps harness/, reports/ and workloads/ into the one package `takeover` through an
# import hook; setuptools warns about that hook on every install, which is noise here.
PIP_INSTALL := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install --quiet

# Debian's python3 makes a venv only with python3-venv: installed first as root, else one line saying so.
$(BIN)/pip:
	@PYTHON=$(PYTHON) $(SYSTEM_PACKAGES) require python3-venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/pip
	$(PIP_INSTALL) -e .
	touch $(RUN_STAMP)

# '.[test]' holds the package too: installing it satisfies RUN_STAMP as well, so the run targets
# do not install again after `make test`.
$(TEST_STAMP): pyproject.toml | $(BIN)/pip
	$(PIP_INSTALL) -e '.[test]'
	touch $(RUN_STAMP) $(TEST_STAMP)

# The gate (CI's `.ci/run`): every test but the long end-to-end ones marked nightly, under 10 minutes on 2 cores.
# The 15 slowest are listed at the end, so a CI log shows where the budget goes; the output is also left in
# SUITE_LOG under a line naming the commit tested (with " dirty" for uncommitted changes) and when, and
# `make bench` records the session's time and those 15 in bench.json (takeover.benchmarks.suite_log).
SUITE_LOG := build/test-log.txt
test: $(TEST_STAMP)
	$(SYSTEM_PACKAGES) install
	$(MAKE) --no-print-directory js arq
	@mkdir -p $(dir $(SUITE_LOG))
	@echo "# make test: commit $$(git rev-parse HEAD 2>/dev/null || echo unknown)$$(git diff --quiet HEAD -- 2>/dev/null \
		|| echo ' dirty'), started $$(date +%Y-%m-%dT%H:%M:%S%z)" > $(SUITE_LOG)
	$(BIN)/pytest $(PYTEST_XDIST) -m "not nightly" --durations=15 $(PYTEST_ARGS) 2>&1 | tee -a $(SUITE_LOG)

# The long end-to-end tests the gate leaves out (tests/README.md): run by the nightly workflow.
test-nightly: $(TEST_STAMP)
	$(SYSTEM_PACKAGES) install
	$(MAKE) --no-print-directory js arq
	$(BIN)/pytest -n $(PYTEST_NIGHTLY_JOBS) --dist loadgroup -m nightly $(PYTEST_ARGS)

# The edit-and-test loop: every test not marked slow (tests/README.md says which are).
test-fast: $(TEST_STAMP)
	$(SYSTEM_PACKAGES) install
	$(MAKE) --no-print-directory js arq
	$(BIN)/pytest $(PYTEST_XDIST) -m "not slow" $(PYTEST_ARGS)

stress: $(RUN_STAMP)
	$(SYSTEM_FOR_RUN)
	$(BIN)/takeover stress $(ARGS)

scenarios: $(RUN_STAMP)
	$(SYSTEM_FOR_RUN)
	$(BIN)/takeover scenarios $(ARGS)

check: $(RUN_STAMP)
	$(BIN)/takeover check $(RUN) $(ARGS)

selftest: $(RUN_STAMP)
	$(SYSTEM_FOR_RUN)
	$(BIN)/takeover selftest $(ARGS)

sweep: $(RUN_STAMP)
	$(SYSTEM_FOR_RUN)
	$(BIN)/takeover sweep $(ARGS)

tune: $(RUN_STAMP)
	$(SYSTEM_FOR_RUN)
	$(BIN)/takeover tune --task-times $(TASK_TIMES) $(ARGS)

hunt: $(RUN_STAMP)
	$(SYSTEM_FOR_RUN)
	$(BIN)/takeover hunt $(ARGS)

soak: $(RUN_STAMP)
	$(SYSTEM_FOR_RUN)
	$(BIN)/takeover soak --minutes $(SOAK_MINUTES) $(ARGS)

# With the suite's own time from the last `make test` when it left its log (SUITE_LOG).
bench: $(RUN_STAMP)
	$(BIN)/takeover bench $(if $(wildcard $(SUITE_LOG)),--with-suite-log $(SUITE_LOG)) $(ARGS)

# The JavaScript adapters' libraries (adapters/js: pg, pg-boss, graphile-worker, better-sqlite3), exactly as
# its package-lock.json pins them, with npm ci; where there is no npm, nothing, and the exec: tests that need
# them skip saying so (under CI=true they fail: tests/helpers/system_packages.py). npm ci runs no install
# scripts; the one library that needs one, better-sqlite3 (SQLite's C code in a node addon), then runs its
# own: prebuild-install fetches a prebuilt addon from GitHub, or, offline, node-gyp compiles it (about
# 3 minutes of one core; python3, make and a C/C++ compiler: g++, which make installs first as root, and
# otherwise names in one line and stops, as for python3-venv). node-gyp is pointed at the headers node's
# package installs beside it (nodesource's nodejs: /usr/include/node), so it downloads nothing. A failed
# build removes the stamp, so the next make tries again. Where node is older than better-sqlite3 asks
# (Debian 12's nodejs is 18; it asks for 20: tests/helpers/node_needs.py), the addon is left out, saying so
# in one line, and the tests of adapters/js/sqlite.js skip naming the node they need.
JS_STAMP := adapters/js/node_modules/.package-lock.json
JS_NODEDIR = $$(prefix=$$(dirname "$$(dirname "$$(readlink -f "$$(command -v node)")")"); \
	[ -f "$$prefix/include/node/node.h" ] && echo "npm_config_nodedir=$$prefix")
js: $(TEST_STAMP)
	@if [ -f $(JS_STAMP) ] && [ $(JS_STAMP) -nt adapters/js/package-lock.json ]; then :; \
	elif ! command -v npm >/dev/null; then \
		echo "make: no npm here, so adapters/js is not installed; its tests skip (as root: apt-get install nodejs npm)" >&2; \
	elif ! (cd adapters/js && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then exit 1; \
	elif old=$$($(BIN)/python -m tests.helpers.node_needs better-sqlite3); then \
		$(SYSTEM_PACKAGES) require g++ \
		&& (cd adapters/js && env $(JS_NODEDIR) npm rebuild better-sqlite3 --loglevel=error) \
		|| { rm -f $(JS_STAMP); exit 1; }; \
	else echo "make: $$old, so its addon is not built; the tests of adapters/js/sqlite.js skip" >&2; fi

# The arq adapter's environment (adapters/py/arq_adapter.py): arq 0.28.0 requires redis-py below 6, which
# takeover's .venv (redis-py 8) cannot take, so it gets a virtual environment of its own, .venv-arq, with exactly
# adapters/py/requirements-arq.txt; the adapter runs there as `--queue "exec:.venv-arq/bin/python
# adapters/py/arq_adapter.py"` and speaks the JSON-lines protocol. Nothing of it enters .venv. A failed install
# removes the stamp, so the next make tries again.
ARQ_VENV := .venv-arq
ARQ_STAMP := $(ARQ_VENV)/.installed
arq: $(ARQ_STAMP)

$(ARQ_STAMP): adapters/py/requirements-arq.txt
	@PYTHON=$(PYTHON) $(SYSTEM_PACKAGES) require python3-venv
	$(PYTHON) -m venv $(ARQ_VENV)
	$(ARQ_VENV)/bin/pip install --quiet --upgrade pip
	$(ARQ_VENV)/bin/pip install --quiet -r adapters/py/requirements-arq.txt || { rm -f $@; exit 1; }
	touch $@

# ruff, then the floors of the package (the import-linter contracts in pyproject.toml), read from the
# package laid out as it is installed (PACKAGE_TREE, below).
lint: $(TEST_STAMP)
	$(BIN)/ruff check harness workloads reports tests docs adapters/py
	$(PACKAGE_TREE)
	cd build/typecheck && PYTHONPATH=. ../../$(BIN)/lint-imports ../../pyproject.toml --no-cache

# The documentation site (mkdocs.yml) into site/, strictly: a broken link or a missing page fails the build.
# Its reference pages are generated from the code by the hook docs/gen_reference.py.
docs: $(TEST_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The generated reference pages committed in docs/reference/ (so relative links resolve in the repository too),
# written again from the code, and the index of docs/analyses/README.md, made from the pages (docs/gen_analyses.py);
# tests/unit/test_docs.py fails while they differ from it.
reference: $(TEST_STAMP)
	$(BIN)/python docs/gen_reference.py --write
	$(BIN)/python docs/gen_analyses.py --write

# mypy and import-linter cannot follow the editable install's import hook, so they read the package
# through a tree of links laid out as it is installed (build/typecheck/takeover: harness/'s entries,
# with reports/ and workloads/ inside); the paths mypy prints are turned back into the source folders'.
PACKAGE_TREE = rm -rf build/typecheck/takeover && mkdir -p build/typecheck/takeover \
	&& cd build/typecheck/takeover && for f in ../../../harness/*; do ln -s "$$f" .; done \
	&& ln -s ../../../reports reports && ln -s ../../../workloads workloads

typecheck: $(TEST_STAMP)
	$(PACKAGE_TREE)
	cd build/typecheck && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p takeover \
		| sed -e 's#^takeover/reports/#reports/#' -e 's#^takeover/workloads/#workloads/#' -e 's#^takeover/#harness/#'

clean:
	rm -rf $(VENV) $(ARQ_VENV) runs build site *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
