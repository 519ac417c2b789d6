# Two commands for a newcomer: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch 2.13.0 is the CPU build; asking for it first keeps pip from pulling a multi-GB CUDA build.
TORCH ?= torch==2.13.0

.PHONY: install demo test lint browser bench clean install-size verl-hook-test

# Test dependencies only: other frameworks' packages whose own config classes and argument parsers
# check the configurations rcdiag writes in their keys (tests/test_framework_configs.py loads one
# module of each). Pinned, and without their dependencies (GPU stacks); TRL's GRPOConfig subclasses
# transformers' TrainingArguments, so transformers comes with its own (small) dependencies.
FRAMEWORK_PACKAGES := trl==1.16.0 openrlhf==0.11.2 verl==0.9.1 skyrl==0.3.0 areal==1.0.4
FRAMEWORK_PARSER_DEPS := transformers==5.23.0 accelerate==1.15.0 omegaconf==2.3.0

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev,torch,ray,polars]"
	$(BIN)/python -m pip install --quiet $(FRAMEWORK_PARSER_DEPS)
	$(BIN)/python -m pip install --quiet --no-deps $(FRAMEWORK_PACKAGES)
	# an editable install ships no bytecode, and with PYTHONDONTWRITEBYTECODE set every start-up
	# would compile rcdiag from source (~0.1 s): compile it once here, as a wheel install does
	$(BIN)/python -m compileall -q rcdiag
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/rcdiag analyze sample_data/drift --json out/drift.json
	$(BIN)/rcdiag report sample_data/drift -o out/drift_report.html --json out/drift_report.json
	@echo "demo: the report is out/drift_report.html: open it in a browser"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The browser test (tests/test_report_browser.py) opens the report in headless Chromium. This step
# says what it does: it installs Debian's chromium with apt-get only when no Chromium is found and
# it can (root, apt-get present); otherwise the browser test is skipped, and pytest says why.
# It installs chromium and what it needs, without recommended packages (measured: 25 packages, none
# upgraded, on Debian 12; a plain install pulled about 115 and upgraded 15, systemd among them).
BROWSERS := chromium chromium-browser google-chrome

browser:
	@found=""; for b in $(BROWSERS); do command -v $$b >/dev/null 2>&1 && { found=$$(command -v $$b); break; }; done; \
	if [ -n "$$found" ]; then \
		echo "browser: $$found found: the browser test will run"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "browser: no Chromium found; installing Debian's chromium for the browser test:"; \
		echo "browser:   apt-get update && apt-get install -y --no-install-recommends chromium"; \
		if apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; then \
			echo "browser: chromium installed: the browser test will run"; \
		else \
			echo "browser: apt-get could not install chromium: the browser test will be skipped"; \
		fi; \
	else \
		echo "browser: no Chromium found and apt-get cannot install it here (needs root and apt-get):"; \
		echo "browser: the browser test will be skipped (install Debian's chromium to run it)"; \
	fi

test: lint browser
	$(BIN)/pytest -n 2 --dist loadgroup

bench: install
	$(BIN)/python benchmarks/bench_analyze.py

clean:
	rm -rf $(VENV) out .mypy_cache .ruff_cache .pytest_cache

# What `pip install rcdiag` costs: a fresh venv in a temporary directory with the base install (no
# extras); checks that no extra (torch, polars, plotly, pandas) is pulled in and that every command
# runs; prints the venv's size before and after the install (du, MiB) and the largest packages; fails
# when the install adds INSTALL_LIMIT_MB or more. Then removes it.
INSTALL_LIMIT_MB ?= 300

install-size:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PYTHON) -m venv "$$tmp/venv" && empty=$$(du -sm "$$tmp/venv" | cut -f1) && \
	"$$tmp/venv/bin/python" -m pip install --quiet . && \
	for extra in torch polars plotly pandas; do \
		if "$$tmp/venv/bin/python" -c "import $$extra" 2>/dev/null; then echo "$$extra was installed"; exit 1; fi; \
	done && \
	"$$tmp/venv/bin/rcdiag" analyze sample_data/drift --quiet --csv "$$tmp/steps.csv" && \
	"$$tmp/venv/bin/rcdiag" compare-presets sample_data/drift --quiet && \
	"$$tmp/venv/bin/rcdiag" report sample_data/drift --quiet -o "$$tmp/report.html" && \
	"$$tmp/venv/bin/rcdiag" check sample_data/drift --quiet -r "rollout_corr/kl.overall < 1" >/dev/null && \
	total=$$(du -sm "$$tmp/venv" | cut -f1) && \
	echo "base install: the fresh venv $$empty MB (pip, setuptools), with rcdiag $$total MB: rcdiag adds $$((total - empty)) MB (limit $(INSTALL_LIMIT_MB)); apparent size $$(du -sm --apparent-size "$$tmp/venv" | cut -f1) MB" && \
	echo "analyze, compare-presets, report and check ran; largest packages (MB):" && \
	(cd "$$tmp"/venv/lib/python*/site-packages && du -sm * | sort -rn | head -8) && \
	test $$((total - empty)) -lt $(INSTALL_LIMIT_MB)

# The verl hook's tests against verl's own classes (tests/test_verl_hook.py; skipped without verl).
# verl's wheel and the few packages `import verl` needs on a CPU go to .verl-site, outside .venv.
VERL_SITE := .verl-site
verl-hook-test: install
	$(BIN)/python -m pip install --quiet --no-deps --target $(VERL_SITE) "verl==0.9.1" \
		"tensordict==0.10.0" pyvers cloudpickle omegaconf codetiming orjson
	$(BIN)/python -m pip install --quiet --target $(VERL_SITE)/deps "transformers>=5.5.3,<5.11,!=5.6.0"
	PYTHONPATH=$(VERL_SITE):$(VERL_SITE)/deps $(BIN)/pytest -q -p no:cacheprovider tests/test_verl_hook.py
