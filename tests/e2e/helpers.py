"""Steps shared by the browser tests: users and posts through the API, logging in the page."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
from playwright.async_api import Page, Route, expect

from tests.graphql_client import gql

PASSWORD = "password123"


async def make_user(http: httpx.AsyncClient, handle: str, name: str | None = None) -> str:
    """Sign up through the API; the token."""
    variables = {"handle": handle, "password": PASSWORD}
    if name:
        variables["displayName"] = name
    data = (await gql(http, "SignUp", variables)).ok()
    return str(data["signUp"]["token"])


async def follow(http: httpx.AsyncClient, token: str, handle: str) -> None:
    (await gql(http, "Follow", {"handle": handle}, token=token)).ok()


async def post(
    http: httpx.AsyncClient, token: str, body: str, visibility: str = "PUBLIC"
) -> dict[str, Any]:
    variables = {"body": body, "visibility": visibility}
    return (await gql(http, "CreatePost", variables, token=token)).ok()["createPost"]


async def log_in(page: Page, handle: str, password: str = PASSWORD) -> None:
    """Log in through the form and wait for the signed-in header."""
    await page.goto("/#/login")
    await page.get_by_test_id("auth-handle").fill(handle)
    await page.get_by_test_id("auth-password").fill(password)
    await page.get_by_test_id("auth-submit").click()
    await expect(page.get_by_test_id("viewer-handle")).to_have_text(f"@{handle}")


async def open_with_token(page: Page, token: str, path: str = "/") -> None:
    """Start already logged in (the page keeps its token in localStorage)."""
    await page.add_init_script(f"localStorage.setItem('hybridfeed.token', {json.dumps(token)})")
    await page.goto(path)
    await expect(page.get_by_test_id("viewer-handle")).to_be_visible()


def feed_post(page: Page, body: str) -> Any:
    return page.get_by_test_id("feed").get_by_test_id("post").filter(has_text=body)


def operation_of(route: Route) -> str | None:
    try:
        payload = json.loads(route.request.post_data or "{}")
    except ValueError:
        return None
    return payload.get("operationName")


def graphql_error(code: str, message: str) -> str:
    error = {"message": message, "extensions": {"code": code}}
    return json.dumps({"data": None, "errors": [error]})


async def scroll_to_end(page: Page, list_testid: str = "feed", max_steps: int = 40) -> None:
    """Scroll like a reader until the list says it has no next page."""
    footer = page.get_by_test_id(f"{list_testid}-footer")
    for _ in range(max_steps):
        if await footer.get_attribute("data-state") == "end":
            return
        await page.mouse.wheel(0, 4000)
        await page.wait_for_timeout(150)
    await expect(footer).to_have_attribute("data-state", "end")


async def eventually(check: Callable[[], bool], within: float = 10.0) -> None:
    """Wait until a plain-Python condition holds (Playwright's expect covers only the page)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)
