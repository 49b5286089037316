# Juncture: `make demo` runs the main job on embedded defaults; `make test` runs the whole suite.
# Both create .venv (Python 3.11) and install the pinned dependencies first.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast install lint format bench clean

demo: $(STAMP)
	$(BIN)/juncture demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# The tests not marked slow (a few minutes): the inner loop while changing code.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

# Bytecode is compiled at install (uv does not by default), so no command compiles its imports at
# start, even where PYTHONDONTWRITEBYTECODE keeps Python from caching them (1 s of `juncture search`).
install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode -r requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python --quiet --no-deps -e .
	$(BIN)/python -m compileall -q catalog
	touch $(STAMP)

# Regenerate the lock after changing dependencies in pyproject.toml.
lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --extra dev --extra semantic --python-version 3.11 -o requirements.lock

# ruff, the format check, mypy over the project (warn_unused_ignores) and the layer check.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q tests/test_layers.py

format: $(STAMP)
	$(BIN)/ruff format .

# Every benchmark (or `make bench NAMES="josie_bench lookup_load"`).
bench: $(STAMP)
	$(BIN)/python -m bench $(NAMES)

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
