# The README's two commands are `make run` and `make test`; the rest are helpers.
# Both (re)build .venv when it is missing or pyproject.toml changed, then call app.launcher,
# which starts embedded PostgreSQL/Redis unless DATABASE_URL/REDIS_URL are set.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Only existing folders: git does not keep empty ones, and ruff fails on a missing path.
LINT_PATHS := $(wildcard app jobs tests migrations benchmarks)
ARGS ?=

.PHONY: run test lint schema clean venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q -e '.[dev]'
	touch $@

venv: $(STAMP)

run: $(STAMP)
	$(PY) -m app.launcher run

# Extra pytest arguments: make test ARGS='-k feed -x'
test: $(STAMP)
	$(PY) -m app.launcher test $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

schema: $(STAMP)
	$(PY) -m app.api.export_schema

clean:
	if [ -x $(PY) ]; then $(PY) -m app.provision down; fi
	rm -rf .run
