"""Browser tests: a real uvicorn server in a subprocess, headless Debian Chromium driven by
Playwright's Python package, and the real write path (tests/pipeline.py) in-process.

The browser is the Debian `chromium` package, not Playwright's download (no network for that
here): when /usr/bin/chromium is missing the session installs it with apt-get, and the tests
skip with the reason only when that is impossible.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import PROJECT_ROOT

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
APT_TIMEOUT_SECONDS = 900
SERVER_START_SECONDS = 30.0
UI_TIMEOUT_MS = 10_000

_install_result: list[str | None] = []


def _chromium_ready() -> bool:
    return os.access(CHROMIUM, os.X_OK)


def ensure_chromium() -> str | None:
    """Make /usr/bin/chromium exist; None when it does, else why it cannot."""
    if _install_result:
        return _install_result[0]
    reason = _install()
    _install_result.append(reason)
    return reason


def _install() -> str | None:
    if _chromium_ready():
        return None
    if shutil.which("apt-get") is None:
        return f"{CHROMIUM} is missing and there is no apt-get to install the chromium package"
    if os.geteuid() != 0:
        return f"{CHROMIUM} is missing; installing it needs root: apt-get install -y chromium"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = Path(tempfile.gettempdir()) / "hybridfeed-e2e-apt.lock"
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # two test sessions must not run apt at once
        if _chromium_ready():
            return None
        print("\n[e2e] installing Debian's chromium package (once)...", file=sys.stderr)
        for argv in (
            ["apt-get", "update", "-q"],
            ["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", "chromium"],
        ):
            try:
                done = subprocess.run(
                    argv, env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_SECONDS
                )
            except subprocess.TimeoutExpired:
                return f"`{' '.join(argv)}` took longer than {APT_TIMEOUT_SECONDS} s"
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                return f"`{' '.join(argv)}` failed: {' | '.join(tail)}"
    return None if _chromium_ready() else f"apt-get finished but {CHROMIUM} is still missing"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """`uvicorn app.web:app` on a fixed port, stoppable and restartable (websocket drops)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix="e2e-uvicorn-", suffix=".log")[1])

    def start(self) -> None:
        argv = [sys.executable, "-m", "uvicorn", "app.web:app"]
        argv += ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, cwd=PROJECT_ROOT, env=dict(os.environ), stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited early:\n{self.logs()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"uvicorn unhealthy after {SERVER_START_SECONDS} s:\n{self.logs()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="session")
def live_server(test_database: str) -> Iterator[ServerProcess]:
    """The API as `make run` starts it, against the test database and Redis db."""
    server = ServerProcess()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    reason = ensure_chromium()
    if reason is not None:
        pytest.skip(f"no browser for the end-to-end tests: {reason}")
    try:
        from playwright.async_api import async_playwright
    except ImportError:  # pragma: no cover - it is a dev dependency
        pytest.skip("the playwright package is missing: pip install -e '.[dev]'")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True
        )
        yield browser
        await browser.close()


@pytest.fixture(scope="session", autouse=True)
def _expect_timeout() -> None:
    with contextlib.suppress(ImportError):
        from playwright.async_api import expect

        expect.set_options(timeout=UI_TIMEOUT_MS)


class Pages:
    """New browser contexts (one per user) on a server; each fails the test on page errors."""

    def __init__(self, browser: Any, server: ServerProcess) -> None:
        self.browser = browser
        self.server = server
        self.contexts: list[Any] = []
        self.errors: list[str] = []

    async def new(
        self,
        width: int = 1280,
        height: int = 860,
        server: ServerProcess | None = None,
        **options: Any,
    ) -> Any:
        base_url = (server or self.server).url
        viewport = {"width": width, "height": height}
        context = await self.browser.new_context(base_url=base_url, viewport=viewport, **options)
        context.set_default_timeout(UI_TIMEOUT_MS)
        self.contexts.append(context)
        page = await context.new_page()
        page.on("pageerror", lambda exc: self.errors.append(f"{exc}"))
        return page

    async def close(self) -> None:
        for context in self.contexts:
            await context.close()


@pytest.fixture
async def pages(browser: Any, live_server: ServerProcess) -> AsyncIterator[Pages]:
    made = Pages(browser, live_server)
    yield made
    await made.close()
    assert not made.errors, f"uncaught errors in the page: {made.errors}"


@pytest.fixture
async def page(pages: Pages) -> Any:
    return await pages.new()


@pytest.fixture
async def http(live_server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the running server, to act as another user "through the API"."""
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        yield client
