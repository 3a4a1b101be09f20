"""Every public error code (API.md, "Errors") gets its own clear message in the page.

The real server produces most of them in the other tests; here the browser's network layer
answers one mutation with each code, so every branch is shown exactly once, deterministically.
"""

from __future__ import annotations

import pytest
from playwright.async_api import expect

from tests.e2e.ui import graphql_error, log_in, operation_of
from tests.helpers import post, sign_up

TITLES = {
    "FORBIDDEN": "Not allowed",
    "NOT_FOUND": "Not found",
    "BAD_USER_INPUT": "Check your input",
    "CURSOR_EXPIRED": "Feed session expired",
    "RATE_LIMITED": "Slow down",
    "CONFLICT": "Conflict",
    "INTERNAL": "Server error",
}


async def _bob_page(page, http) -> None:
    await sign_up(http, "alice")
    bob = await sign_up(http, "bob")
    await post(http, bob, "a post to like")
    await log_in(page, "alice")
    await page.goto("/#/u/bob")
    await expect(page.get_by_test_id("post")).to_have_count(1)


@pytest.mark.parametrize("code", sorted(TITLES))
async def test_each_error_code_has_a_clear_message(page, http, code: str) -> None:
    await _bob_page(page, http)
    message = f"the server's own words for {code}"

    async def answer(route) -> None:
        if operation_of(route) == "LikePost":
            await route.fulfill(
                status=200, content_type="application/json", body=graphql_error(code, message)
            )
        else:
            await route.continue_()

    await page.route("**/graphql", answer)
    await page.get_by_test_id("like").click()
    toast = page.get_by_test_id("toast").filter(has_text=TITLES[code])
    await expect(toast).to_have_attribute("data-code", code)
    if code == "CURSOR_EXPIRED":
        await expect(toast).to_contain_text("starts again from the top")
    elif code == "NOT_FOUND":
        await expect(toast).to_contain_text("deleted or is no longer visible to you")
    else:
        await expect(toast).to_contain_text(message)
    if code == "NOT_FOUND":  # a post you may not see is gone from the page
        await expect(page.get_by_test_id("post")).to_have_count(0)
    else:  # the optimistic like is rolled back
        await expect(page.get_by_test_id("like")).to_have_attribute("aria-pressed", "false")
        await expect(page.get_by_test_id("like-count")).to_have_text("0")


async def test_unauthenticated_logs_out_with_the_reason(page, http) -> None:
    await _bob_page(page, http)

    async def answer(route) -> None:
        if operation_of(route) == "LikePost":
            body = graphql_error("UNAUTHENTICATED", "Your session token has expired; log in again.")
            await route.fulfill(status=200, content_type="application/json", body=body)
        else:
            await route.continue_()

    await page.route("**/graphql", answer)
    await page.get_by_test_id("like").click()
    await expect(page.get_by_test_id("auth-notice")).to_contain_text("session token has expired")
    assert await page.evaluate("localStorage.getItem('hybridfeed.token')") is None


async def test_an_unreachable_server_is_named_as_such(page, http) -> None:
    await _bob_page(page, http)

    async def answer(route) -> None:
        if operation_of(route) == "LikePost":
            await route.abort("connectionrefused")
        else:
            await route.continue_()

    await page.route("**/graphql", answer)
    await page.get_by_test_id("like").click()
    toast = page.get_by_test_id("toast").filter(has_text="Cannot reach the server")
    await expect(toast).to_have_attribute("data-code", "NETWORK")
