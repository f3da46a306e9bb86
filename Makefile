# Millrace developer commands. `make help` lists them.
# Everything runs inside .venv, created from the system python3 by `make setup`.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CARGO  ?= cargo
NATIVE := --manifest-path native/Cargo.toml
# The native core is rebuilt (by `pip install -e`, through setuptools-rust) when it changes.
NATIVE_SOURCES := $(shell find native -path '*/target' -prune -o \( -name '*.rs' -o -name 'Cargo.*' \) -print)
# The binding's build and clippy find the interpreter they build for here.
export PYO3_PYTHON := $(abspath $(BIN)/python)

.DEFAULT_GOAL := help
.PHONY: help setup test-tools run fmt lint test test-fast fuzz proto proto-check bench clean

help: ## List the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints.txt $(NATIVE_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP) ## Create .venv and install Millrace with its dev tools and native core

test-tools: ## Install what the tests run besides Python (Debian's prometheus, faketime, iproute2 and nftables)
	@scripts/install_test_tools.sh

run: setup ## Run the main job: the click-stream demo on a local cluster, checked
	$(BIN)/python -m examples.clickstream.demo

fmt: setup ## Format and auto-fix the code
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .
	$(CARGO) fmt $(NATIVE) --all

lint: setup ## ruff + mypy + stubtest, cargo fmt + clippy, as CI runs them
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest --mypy-config-file pyproject.toml millrace._native
	$(CARGO) fmt $(NATIVE) --all --check
	$(CARGO) clippy $(NATIVE) --workspace --all-targets -- -D warnings

test: setup test-tools ## Run the full test suite: the native core's Rust tests, then pytest
	$(CARGO) test $(NATIVE) -p millrace-core
	$(BIN)/python -m pytest

test-fast: setup ## Run the tests that spawn no processes
	$(CARGO) test $(NATIVE) -p millrace-core
	$(BIN)/python -m pytest -m "not slow"

FUZZ_SECONDS ?= 60
fuzz: ## Fuzz the native decoders of untrusted bytes (cargo-fuzz; FUZZ_SECONDS per target)
	@command -v cargo-fuzz >/dev/null || $(CARGO) install --locked cargo-fuzz
	cd native/fuzz && for t in $$(RUSTC_BOOTSTRAP=1 $(CARGO) fuzz list); do \
		RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; done

proto: setup ## Regenerate millrace/wire/v1 from proto/
	$(BIN)/python scripts/gen_protos.py

proto-check: setup ## Fail if the generated code is stale
	$(BIN)/python scripts/gen_protos.py --check

bench: setup ## Run every benchmark in bench/
	@for b in bench/*_bench.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean: ## Remove the virtualenv, caches and native build
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info native/target millrace/_native.*.so
