# Two commands for a newcomer: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch 2.13.0 is the CPU build; asking for it first keeps pip from pulling a multi-GB CUDA build.
TORCH ?= torch==2.13.0

.PHONY: install demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/rcdiag analyze sample_data/drift --json out/drift.json
	$(BIN)/rcdiag report sample_data/drift -o out/drift_report.html --json out/drift_report.json

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -n 2

bench: install
	$(BIN)/python benchmarks/bench_analyze.py

clean:
	rm -rf $(VENV) out .mypy_cache .ruff_cache .pytest_cache
