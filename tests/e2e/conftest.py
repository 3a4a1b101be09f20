"""Browser tests: a real uvicorn server in a subprocess, headless Debian Chromium driven by
Playwright's Python package, and the real write path (tests/pipeline.py) in-process.

The browser is the Debian `chromium` package, not Playwright's download (no network for that
here). Installing it is an explicit step, `make browser` (which `make test` runs first); these
tests only check that /usr/bin/chromium is there and fail, naming that step, when it is not.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.servers import ApiServer

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
UI_TIMEOUT_MS = 10_000

MISSING_BROWSER = (
    f"{CHROMIUM} is missing: the browser tests need Debian's chromium package. Install it with "
    "`make browser` (apt-get install chromium, as root), or run the other tests with "
    "`make test ARGS='--ignore=tests/e2e'`."
)


def chromium_ready() -> bool:
    return os.access(CHROMIUM, os.X_OK)


@pytest.fixture(scope="session")
async def live_server(test_database: str) -> AsyncIterator[ApiServer]:
    """The API as `make run` starts it, against the test database and Redis db."""
    async with ApiServer() as server:
        yield server


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    if not chromium_ready():
        pytest.fail(MISSING_BROWSER, pytrace=False)
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

    def __init__(self, browser: Any, server: ApiServer) -> None:
        self.browser = browser
        self.server = server
        self.contexts: list[Any] = []
        self.errors: list[str] = []

    async def new(
        self,
        width: int = 1280,
        height: int = 860,
        server: ApiServer | None = None,
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
async def pages(browser: Any, live_server: ApiServer) -> AsyncIterator[Pages]:
    made = Pages(browser, live_server)
    yield made
    await made.close()
    assert not made.errors, f"uncaught errors in the page: {made.errors}"


@pytest.fixture
async def page(pages: Pages) -> Any:
    return await pages.new()


@pytest.fixture
async def http(live_server: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the running server, to act as another user "through the API"."""
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        yield client
