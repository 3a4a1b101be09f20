"""Sign up, log in, log out, and what the page says when that goes wrong."""

from __future__ import annotations

import re

from playwright.async_api import expect

from tests.e2e.ui import log_in
from tests.helpers import PASSWORD, sign_up


async def test_sign_up_then_the_token_survives_a_reload(page) -> None:
    await page.goto("/")
    await expect(page).to_have_url(re.compile(r"#/login$"))
    await page.get_by_test_id("tab-signup").click()
    await page.get_by_test_id("auth-handle").fill("newbie")
    await page.get_by_test_id("auth-display-name").fill("New Bie")
    await page.get_by_test_id("auth-password").fill(PASSWORD)
    await page.get_by_test_id("auth-submit").click()
    await expect(page.get_by_test_id("viewer-handle")).to_have_text("@newbie")
    assert await page.evaluate("localStorage.getItem('hybridfeed.token')")

    await page.reload()
    await expect(page.get_by_test_id("viewer-handle")).to_have_text("@newbie")
    await expect(page.get_by_test_id("compose")).to_be_visible()

    await page.get_by_test_id("logout").click()
    await expect(page.get_by_test_id("auth-submit")).to_have_text("Log in")
    assert await page.evaluate("localStorage.getItem('hybridfeed.token')") is None


async def test_log_in_and_its_error_messages(page, http) -> None:
    await sign_up(http, "alice")
    await page.goto("/#/login")
    error = page.get_by_test_id("auth-error")

    await page.get_by_test_id("auth-handle").fill("alice")
    await page.get_by_test_id("auth-password").fill("not-the-password")
    await page.get_by_test_id("auth-submit").click()
    await expect(error).to_have_attribute("data-code", "UNAUTHENTICATED")
    await expect(error).to_contain_text("Wrong handle or password.")

    await page.get_by_test_id("tab-signup").click()
    await page.get_by_test_id("auth-handle").fill("alice")
    await page.get_by_test_id("auth-password").fill(PASSWORD)
    await page.get_by_test_id("auth-submit").click()
    await expect(error).to_have_attribute("data-code", "CONFLICT")
    await expect(error).to_contain_text("@alice is taken")

    await page.get_by_test_id("auth-handle").fill("No Spaces!")
    await page.get_by_test_id("auth-submit").click()
    await expect(error).to_have_attribute("data-code", "BAD_USER_INPUT")
    await expect(error).to_contain_text("Check your input")

    await log_in(page, "alice")


async def test_a_dead_token_sends_you_to_log_in_with_the_reason(page) -> None:
    await page.add_init_script("localStorage.setItem('hybridfeed.token', 'not-a-real-token')")
    await page.goto("/")
    await expect(page.get_by_test_id("auth-submit")).to_be_visible()
    assert await page.evaluate("localStorage.getItem('hybridfeed.token')") is None


async def test_a_deep_link_survives_logging_in(page, http) -> None:
    await sign_up(http, "alice")
    await sign_up(http, "bob")
    await page.goto("/#/u/bob")
    await expect(page.get_by_test_id("auth-submit")).to_be_visible()
    await page.get_by_test_id("auth-handle").fill("alice")
    await page.get_by_test_id("auth-password").fill(PASSWORD)
    await page.get_by_test_id("auth-submit").click()
    await expect(page.get_by_test_id("profile")).to_have_attribute("data-handle", "bob")
