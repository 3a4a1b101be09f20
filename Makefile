# The README's two commands are `make run` and `make test`; the rest are helpers.
# Both (re)build .venv when it is missing or pyproject.toml or requirements.lock changed, then call
# devtools.launcher, which starts embedded PostgreSQL/Redis unless DATABASE_URL/REDIS_URL are set.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Only existing folders: git does not keep empty ones, and ruff fails on a missing path.
LINT_PATHS := $(wildcard app jobs tests migrations benchmarks devtools)
ARGS ?=
LOCK := requirements.lock
APP_LOCK := requirements-app.lock
UV_COMPILE := $(VENV)/bin/uv pip compile --quiet --generate-hashes --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --custom-compile-command 'make lock'
# The browser tests (tests/e2e) drive Debian's chromium package through Playwright.
CHROMIUM := /usr/bin/chromium
# tests/ops/test_ops_files.py checks ops/prometheus/ with promtool from Debian's prometheus package.
PROMTOOL := /usr/bin/promtool

.PHONY: run test lint schema clean venv browser promtool lock stop canary bench

# Installs exactly what requirements.lock pins, every file checked against its sha256, without
# resolving anything (--no-deps): the lock is the whole resolution, made by uv with the
# override of arq's redis<6 pin (decision 0090), which pip's resolver would refuse. The
# project itself goes in the same way. `make lock` refreshes the lock.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --disable-pip-version-check -q --require-hashes --no-deps -r $(LOCK)
	$(VENV)/bin/pip install --disable-pip-version-check -q --no-deps -e .
	touch $@

venv: $(STAMP)

# After editing dependencies in pyproject.toml: re-resolve, pin and hash everything (app + dev +
# embedded in $(LOCK), what `make run`/`make test` install; the app alone in $(APP_LOCK), same
# versions, for deployments: no embedded servers, no dev tools). UPGRADE=1 moves every pin to
# the newest allowed release.
lock: $(STAMP)
	$(UV_COMPILE) $(if $(UPGRADE),--upgrade) --extra dev --extra embedded -o $(LOCK) pyproject.toml
	$(UV_COMPILE) -c $(LOCK) -o $(APP_LOCK) pyproject.toml

run: $(STAMP)
	$(PY) -m devtools.launcher run

# The whole suite in two phases, everything but tests/reliability across TEST_WORKERS pytest-xdist
# workers (default: CPUs + 1), then tests/reliability alone (decision 0074). With pytest
# arguments, one pytest process: make test ARGS='-k feed -x'
test: $(STAMP) browser promtool
	$(PY) -m devtools.launcher test $(ARGS)

# The evidence (issue 25, docs/benchmarks/README.md): the generated network, the real processes,
# push vs pull vs hybrid vs the naive join; report and charts into docs/benchmarks/.
# make bench SCALE=small|medium|large BENCH_ARGS='--reuse' (DATABASE_URL's server, else embedded).
SCALE ?= medium
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) -m benchmarks.report --scale $(SCALE) $(BENCH_ARGS)

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

# Like browser: Debian's prometheus package brings promtool, which checks and unit-tests the alert
# rules in ops/prometheus/ (`promtool check rules`, `promtool test rules`, tests/ops/test_ops_files.py),
# and the prometheus server that benchmarks/dashboard_plot.py runs; the tests start no server.
promtool:
	@if [ -x $(PROMTOOL) ]; then \
	  echo "promtool: $(PROMTOOL) is installed"; \
	elif ! command -v apt-get >/dev/null; then \
	  echo "promtool: $(PROMTOOL) is missing and there is no apt-get: install Prometheus's" \
	    "promtool there yourself (tests/ops/test_ops_files.py needs it)"; exit 1; \
	else \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  echo "promtool: installing Debian's prometheus package for the alert-rule tests:"; \
	  echo "  $$sudo apt-get update && $$sudo apt-get install -y prometheus"; \
	  $$sudo apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends \
	    -o DPkg::Lock::Timeout=300 prometheus; \
	fi

# The dead-code check: vulture reads every folder (a name a test uses is used) and fails on
# app/, jobs/ or devtools/; names only a framework calls are in vulture_whitelist.py.
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy app jobs
	@found=$$($(VENV)/bin/vulture --min-confidence 60 $(LINT_PATHS) vulture_whitelist.py); \
	code=$$?; if [ $$code -ne 0 ] && [ $$code -ne 3 ]; then echo "$$found"; exit $$code; fi; \
	dead=$$(echo "$$found" | grep -E '^(app|jobs|devtools)/'); \
	if [ -n "$$dead" ]; then echo "$$dead"; echo "dead code: delete it, or add a name only" \
	  "a framework calls to vulture_whitelist.py"; exit 1; fi; echo "vulture: no dead code"

# The fence's and the fast engine's tests against the newest release of every upstream whose
# internals are used (docs/decisions/0071), in a scratch virtualenv (.run/canary-venv); the
# result goes to docs/canary.md (commit it). It says whether the pins in pyproject.toml can
# move. ONLY=starlette (a name from devtools/canary.py's LIBRARIES) upgrades that one alone.
canary: $(STAMP)
	$(PY) -m devtools.canary $(if $(ONLY),--only $(ONLY))

schema: $(STAMP)
	$(PY) -m app.api.endpoint.export_schema

# Stops the embedded PostgreSQL and Redis (and a `make run` left behind by a killed terminal);
# their data under .run/ stays. `make clean` stops them and deletes the data.
stop:
	if [ -x $(PY) ]; then $(PY) -m devtools.launcher stop; fi

clean:
	if [ -x $(PY) ]; then $(PY) -m devtools.launcher stop; fi
	rm -rf .run
