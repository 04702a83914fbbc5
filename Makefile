# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export KOORDPY_CACHE_DIR ?= $(HOME)/.cache/koordpy

.PHONY: install lock demo test lint unit e2e controlplane browser bench fuzz clean

LOCKS := requirements.lock requirements-dev.lock

# Exactly the locked versions, nothing resolved on the day: both locks with --no-deps (a pin missing
# from them fails `pip check`), koordpy itself built by the locked setuptools without isolation.
$(STAMP): pyproject.toml $(LOCKS)
	@echo "koordpy: creating $(VENV) and installing koordpy with the locked dependencies and development tools (a minute or two the first time)"
	@$(PYTHON) -m venv --clear $(VENV)
	@$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -r requirements.lock -r requirements-dev.lock
	@# setuptools announces every editable install of a flat layout in a boxed banner; nothing to act on
	@PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip install --quiet --disable-pip-version-check \
		--no-deps --no-build-isolation -e .
	@$(BIN)/pip check --disable-pip-version-check >/dev/null || { $(BIN)/pip check; exit 1; }
	@touch $(STAMP)

install: $(STAMP)

# Resolve pyproject.toml's dependencies afresh and write both locks (hack/lock.py); commit them with
# the pyproject.toml change that needed them.
lock:
	$(PYTHON) hack/lock.py

demo: install
	$(BIN)/koordpy simulate examples/quickstart.yaml

lint: install
	$(BIN)/ruff check koordpy operators tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: install
	$(BIN)/pytest -q --ignore=tests/e2e

# builds kube-apiserver, kube-controller-manager, etcd, KWOK and helm from Go modules into $(KOORDPY_CACHE_DIR)/bin when missing
controlplane:
	@if command -v go >/dev/null 2>&1; then bash hack/controlplane/build.sh; \
	else echo "koordpy: no Go toolchain: the end-to-end tests will be skipped (a failure under CI=true)"; fi

# Chromium from the distribution's packages, for the browser test of `koordpy simulate --html`
browser:
	@bash hack/browser/install.sh

e2e: install controlplane
	$(BIN)/pytest -q tests/e2e

test: lint controlplane browser
	$(BIN)/pytest -q

# the fuzz suite of tests/fuzz with its long hypothesis profile (minutes); `make test` runs it briefly
fuzz: install
	KOORDPY_FUZZ=long $(BIN)/pytest -q -m fuzz tests/fuzz

bench: install
	$(BIN)/python benchmarks/bench_scheduling.py
	$(BIN)/python benchmarks/bench_topology.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# koordpy beside kube-scheduler and two raw binders on a real kube-apiserver with KWOK nodes
# (benchmarks/README.md); builds kube-scheduler on first use. Not part of `make test`.
#   make bench-cluster BENCH_CLUSTER_ARGS='--scenario plain-pending --nodes 5000'
BENCH_CLUSTER_ARGS ?= --scenario all
.PHONY: bench-cluster
bench-cluster: install
	$(BIN)/python benchmarks/bench_cluster.py $(BENCH_CLUSTER_ARGS)
