# `make demo` and `make test` each set up a fresh machine first (Debian packages, a virtualenv
# with the CPU build of torch, the project), so they are the only two commands anyone needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test lint typecheck bench

$(STAMP): pyproject.toml
	bash scripts/setup.sh
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/playlisteval demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -q -p no:cacheprovider -n 3 --dist loadfile --no-loadscope-reorder --durations=15

bench: $(STAMP)
	$(BIN)/python bench/index.py
