# Bootstraps uv and nox when missing, then wraps the nox sessions.
# `make demo` is the main job on this machine; `make test` passes the tests.
#
# uv and nox come from PATH when there; otherwise they are installed into a private
# venv .tools/ (never into the system Python: Debian/Ubuntu forbid that, PEP 668).

SHELL := /bin/bash
TOOLS := $(CURDIR)/.tools
export PATH := $(TOOLS)/bin:$(PATH)

.PHONY: bootstrap demo doctor test test-fast lint lock bench knowledge-check

bootstrap:
	@if ! command -v uv >/dev/null || ! command -v nox >/dev/null; then \
	  echo "make: installing uv and nox into $(TOOLS)"; \
	  python3 -m venv "$(TOOLS)" || { echo "make: python3 -m venv failed; install python3-venv (Debian/Ubuntu: apt-get install python3-venv)"; exit 1; }; \
	  "$(TOOLS)/bin/python" -m pip install --quiet --disable-pip-version-check uv nox; \
	fi
	@uv --version && nox --version

demo: bootstrap      ## facts, plan, build and probe this machine's environment (hpcenv doctor)
	nox -s doctor

doctor: demo

test: bootstrap      ## the test suite (a worker per core, and one more)
	nox -s tests

test-fast: bootstrap ## the unit tests alone (tests/unit: seconds)
	nox -s unit

lint: bootstrap      ## ruff, mypy --strict, import-linter's layers, profiles validate
	nox -s lint

lock: bootstrap      ## regenerate lockfiles/ with hpcenv lock
	nox -s lock

knowledge-check: bootstrap ## PyPI has no torch/vLLM/flash-attn release the data lacks (live; not in `make test`)
	nox -s knowledge-check

bench: bootstrap     ## measurements against baselines -> bench/RESULTS.md
	nox -s bench
