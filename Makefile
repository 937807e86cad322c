# Bootstraps uv and nox when missing, then wraps the nox sessions.
# `make demo` is the main job on this machine; `make test` passes the tests.

SHELL := /bin/bash
export PATH := $(HOME)/.local/bin:$(PATH)
UV := $(shell command -v uv 2>/dev/null)
NOX := $(shell command -v nox 2>/dev/null)

.PHONY: bootstrap demo test lint lock bench doctor

bootstrap:
ifndef UV
	python3 -m pip install --user --quiet uv
endif
ifndef NOX
	python3 -m pip install --user --quiet nox
endif
	@uv --version && nox --version

demo: bootstrap      ## facts, plan, build and probe this machine's environment
	nox -s doctor

doctor: demo

test: bootstrap      ## the test suite
	nox -s tests

lint: bootstrap      ## ruff, mypy --strict, profiles validate
	nox -s lint

lock: bootstrap      ## regenerate lockfiles/ with hpcenv lock
	nox -s lock

bench: bootstrap     ## measurements against baselines -> bench/RESULTS.md
	nox -s bench
