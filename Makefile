# The two commands a newcomer types (README): `make demo` and `make test`.
# Both create .venv in the checkout on first use. On a machine without torch, torch==2.13.0
# (a CPU build) is installed; an existing torch (e.g. a GPU build) is kept.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.klineage-installed
# pytest workers: 2 by default (the CI machine has 2 cores); PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= 2

.PHONY: setup demo test lint unit interp gpu clean browser isolation

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev,llm,ray,liger,mcp]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup isolation
	$(BIN)/klineage demo

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q tests/unit

interp: setup
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) tests/interp

# The report test opens the HTML report in headless Chromium (Debian's package).
browser:
	@command -v chromium >/dev/null || [ "$$KLINEAGE_SKIP_BROWSER" = 1 ] || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The gate runs candidate and problem code inside bubblewrap (Debian's package) where it works;
# without it, a weaker isolation level (gate/sandbox.py). KLINEAGE_SKIP_BWRAP=1 skips the install.
isolation:
	@command -v bwrap >/dev/null || [ "$$KLINEAGE_SKIP_BWRAP" = 1 ] || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }

test: lint browser isolation
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --durations=15 tests/unit tests/interp

# Opt-in, on a machine with a CUDA GPU (see docs/DEVICE.md).
gpu:
	$(BIN)/pytest -q tests/gpu

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
