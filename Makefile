# `make demo` and `make test` each set up a fresh machine first (Debian packages, a virtualenv
# with the CPU build of torch, the project), so they are the only two commands anyone needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test lint typecheck docs bench real-judge

$(STAMP): pyproject.toml constraints.txt
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

# The docs site (mkdocs.yml, docs/), built strictly: a broken link or anchor fails the build.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

test: lint typecheck docs
	$(BIN)/pytest -q -p no:cacheprovider -n 3 --dist loadfile --no-loadscope-reorder --durations=15

bench: $(STAMP)
	$(BIN)/python bench/index.py

# A real model (Qwen2.5-Coder-1.5B-Instruct from the `real` extra's GGUF parts, on the CPU) judges
# the demo benchmark's transcript-only condition beside the offline judges (bench/real_judge.py;
# minutes to load, a minute or more per call on 2 cores: LIMIT bounds the pairs).
LIMIT ?= 6
real-judge: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[real]"
	nice -n 19 $(BIN)/python bench/real_judge.py --limit $(LIMIT)
