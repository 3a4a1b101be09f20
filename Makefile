# The README's two commands are `make run` and `make test`; the rest are helpers.
# Both (re)build .venv when it is missing or pyproject.toml changed, then call devtools.launcher,
# which starts embedded PostgreSQL/Redis unless DATABASE_URL/REDIS_URL are set.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Only existing folders: git does not keep empty ones, and ruff fails on a missing path.
LINT_PATHS := $(wildcard app jobs tests migrations benchmarks devtools)
ARGS ?=
# The browser tests (tests/e2e) drive Debian's chromium package through Playwright.
CHROMIUM := /usr/bin/chromium

.PHONY: run test lint schema clean venv browser

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q -e '.[dev]'
	touch $@

venv: $(STAMP)

run: $(STAMP)
	$(PY) -m devtools.launcher run

# Extra pytest arguments: make test ARGS='-k feed -x'
test: $(STAMP) browser
	$(PY) -m devtools.launcher test $(ARGS)

# System-wide, so explicit: installs Debian's chromium package (apt-get, as root or via sudo)
# unless $(CHROMIUM) is already there. `make test` runs it first; the tests only check for it.
browser:
	@if [ -x $(CHROMIUM) ]; then \
	  echo "browser: $(CHROMIUM) is installed"; \
	elif ! command -v apt-get >/dev/null; then \
	  echo "browser: $(CHROMIUM) is missing and there is no apt-get: install Chromium there" \
	    "yourself (the browser tests in tests/e2e need it)"; exit 1; \
	else \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  echo "browser: installing Debian's chromium package for the browser tests (tests/e2e):"; \
	  echo "  $$sudo apt-get update && $$sudo apt-get install -y chromium"; \
	  $$sudo apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q \
	    -o DPkg::Lock::Timeout=300 chromium; \
	fi

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/lint-imports

schema: $(STAMP)
	$(PY) -m app.api.export_schema

clean:
	if [ -x $(PY) ]; then $(PY) -m devtools.provision down; fi
	rm -rf .run
