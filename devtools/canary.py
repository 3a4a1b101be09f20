"""`make canary`: the fence's and the fast engine's tests against the newest release of every
upstream whose internals the service uses.

Why: the service relies on internals of Strawberry, graphql-core, uvicorn, `websockets`,
Starlette and prometheus_client (each behind its adapter: app/api/upstream,
app/realtime/prometheus_internals.py; docs/decisions/0071), so pyproject.toml pins each to
the range tested. This shows whether a pin can move: a scratch virtualenv (.run/canary-venv)
gets exactly the project's lock, then the newest releases of the upstreams (all of them, or
those named with --only; with whatever they need), and runs the adapters' assumption tests,
graphql-core's execution tests pointed at the fast executor, the differential tests
(tests/api) and the socket-memory tests through the launcher (`make test`'s way to
PostgreSQL and Redis). The outcome is written to docs/canary.md, committed like any doc: the
last result, its date, the versions tried, the pinned ones, pass or fail and the failures.

Usage: python -m devtools.canary [--only NAME ...]   (exit status: pytest's)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import venv
from datetime import UTC, datetime
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
VENV = PROJECT_ROOT / ".run" / "canary-venv"
RECORD = PROJECT_ROOT / "docs" / "canary.md"
# Every upstream whose internals are used (the `upstream-internals` contract in .importlinter).
LIBRARIES = (
    "strawberry-graphql",
    "graphql-core",
    "uvicorn",
    "websockets",
    "starlette",
    "prometheus-client",
)
TESTS = (
    "tests/api/upstream/test_fast_adapter.py",
    "tests/api/upstream/test_upstream_fence.py",
    "tests/realtime/test_lean_sockets.py",
    "tests/api/graphql_core",
    "tests/api/fast/test_fast_execution.py",
    "tests/api/fast/test_compiled_documents.py",
)


def _run(*args: str | Path, capture: bool = False) -> subprocess.CompletedProcess[str]:
    print("canary:", " ".join(str(a) for a in args), flush=True)
    return subprocess.run(
        [str(a) for a in args],
        cwd=PROJECT_ROOT,
        check=not capture,
        text=True,
        capture_output=capture,
    )


def _versions(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m;"
        f"print(*(f'{{n}}=={{m.version(n)}}' for n in {LIBRARIES!r}), sep='\\n')"
    )
    out = _run(python, "-c", code, capture=True).stdout
    return dict(line.split("==", 1) for line in out.split())


def _pinned() -> dict[str, str]:
    lock = (PROJECT_ROOT / "requirements.lock").read_text()
    found = {}
    for name in LIBRARIES:
        match = re.search(rf"^{re.escape(name)}==(\S+)", lock, re.MULTILINE)
        found[name] = match.group(1) if match else "?"
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        action="append",
        choices=LIBRARIES,
        help="upgrade only this upstream (repeatable; default: every one)",
    )
    upgraded = tuple(parser.parse_args(argv).only or LIBRARIES)
    if not VENV.exists():
        venv.create(VENV, with_pip=True)
    python = VENV / "bin" / "python"
    pip = (python, "-m", "pip", "install", "--disable-pip-version-check", "-q")
    # The lock as is (--no-deps): uv resolved it past arq's redis pin (decision 0090).
    _run(*pip, "--require-hashes", "--no-deps", "-r", "requirements.lock")
    _run(*pip, "--upgrade", *upgraded)
    _run(*pip, "--no-deps", "-e", ".")
    tried, pinned = _versions(python), _pinned()
    status, output = _stream(python, "-m", "devtools.launcher", "test", "-q", *TESTS)
    summary = next(
        (line.strip("= ") for line in reversed(output.splitlines()) if " in " in line),
        "no pytest summary",
    )
    failed = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)))
    _record(tried, pinned, upgraded, status, summary, failed)
    return status


def _stream(*args: str | Path) -> tuple[int, str]:
    """Run a command, its output shown as it comes and kept."""
    print("canary:", " ".join(str(a) for a in args), flush=True)
    lines = []
    with subprocess.Popen(
        [str(a) for a in args],
        cwd=PROJECT_ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            lines.append(line)
    return proc.returncode, "".join(lines)


def _record(
    tried: dict[str, str],
    pinned: dict[str, str],
    upgraded: tuple[str, ...],
    status: int,
    summary: str,
    failed: list[str],
) -> None:
    same = tried == pinned
    lines = [
        "# Upgrade canary: the last result",
        "",
        "Written by `make canary` (devtools/canary.py): the upstream adapters' assumption tests,",
        "graphql-core execution, differential (tests/api) and socket-memory tests against the",
        "newest release of each upstream whose internals the service uses, in a scratch",
        "virtualenv. Pass means the pins in pyproject.toml can move to these versions (then",
        "`make lock UPGRADE=1`); fail lists the tests to read first (the upstream's adapter,",
        "app/api/upstream or app/realtime/prometheus_internals.py, is where an upgrade is made).",
        "",
        "| | |",
        "| --- | --- |",
        f"| date | {datetime.now(UTC):%Y-%m-%d %H:%M} UTC |",
        *(
            f"| {n} {'tried' if n in upgraded else 'kept'} | {tried.get(n, '?')} "
            f"(pinned: {pinned[n]}) |"
            for n in LIBRARIES
        ),
        f"| result | **{'pass' if status == 0 else 'fail'}** ({summary}) |",
        "",
    ]
    if same:
        lines += [
            "The newest releases the package index offered are the pinned ones: this run",
            "checked the pin itself, not an upgrade.",
            "",
        ]
    if failed:
        lines += ["Failed:", "", *(f"- `{name}`" for name in failed[:50]), ""]
    RECORD.write_text("\n".join(lines))
    print(f"canary: {RECORD.relative_to(PROJECT_ROOT)} written", flush=True)


if __name__ == "__main__":
    sys.exit(main())
