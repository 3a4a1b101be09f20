"""A user's page: follow, unfollow, block, the fan-out mode badge, and missing users."""

from __future__ import annotations

from playwright.async_api import expect

from tests.e2e.ui import log_in
from tests.helpers import follow, post, sign_up


async def test_follow_unfollow_and_block_from_a_user_page(page, http) -> None:
    await sign_up(http, "alice")
    bob = await sign_up(http, "bob", name="Bob Tan")
    await post(http, bob, "bob's first post")
    await log_in(page, "alice")

    await page.goto("/#/u/bob")
    profile = page.get_by_test_id("profile")
    await expect(profile).to_contain_text("Bob Tan")
    await expect(page.get_by_test_id("fanout-mode")).to_have_text("PUSH")
    await expect(page.get_by_test_id("follower-count")).to_contain_text("0 followers")
    await expect(page.get_by_test_id("user-posts")).to_contain_text("bob's first post")

    await page.get_by_test_id("follow").click()
    await expect(page.get_by_test_id("unfollow")).to_be_visible()
    await expect(page.get_by_test_id("follower-count")).to_contain_text("1 follower")

    await page.get_by_test_id("unfollow").click()
    await expect(page.get_by_test_id("follow")).to_be_visible()
    await expect(page.get_by_test_id("follower-count")).to_contain_text("0 followers")

    await page.get_by_test_id("block").click()
    await expect(page.get_by_test_id("blocked-badge")).to_be_visible()
    await expect(page.get_by_test_id("unblock")).to_be_visible()
    # Blocked: the page says why following is refused, in the server's words.
    await page.get_by_test_id("follow").click()
    toast = page.get_by_test_id("toast").filter(has_text="Not allowed")
    await expect(toast).to_have_attribute("data-code", "FORBIDDEN")
    await expect(toast).to_contain_text("one of you blocked the other")

    await page.get_by_test_id("unblock").click()
    await expect(page.get_by_test_id("block")).to_be_visible()
    await page.get_by_test_id("follow").click()
    await expect(page.get_by_test_id("unfollow")).to_be_visible()


async def test_a_big_author_shows_the_pull_badge(page, http, pipeline) -> None:
    star = await sign_up(http, "star", name="Star Power")
    for i in range(10):  # FANOUT_PULL_THRESHOLD is 10 in the test settings
        await follow(http, await sign_up(http, f"fan{i}"), "star")
    await post(http, star, "hello, all ten of you")
    await pipeline.settle()  # the mode is decided when the post fans out

    await log_in(page, "fan0")
    await page.goto("/#/u/star")
    await expect(page.get_by_test_id("fanout-mode")).to_have_text("PULL")
    await expect(page.get_by_test_id("fanout-mode")).to_have_attribute("data-mode", "PULL")
    await expect(page.get_by_test_id("profile")).to_contain_text("Fan-out on read")
    await expect(page.get_by_test_id("follower-count")).to_contain_text("10 followers")
    await expect(page.get_by_test_id("unfollow")).to_be_visible()
    # Their posts carry the badge too.
    await expect(page.get_by_test_id("user-posts").locator(".badge.pull").first).to_be_visible()


async def test_a_missing_user_is_a_clear_not_found(page, http) -> None:
    await sign_up(http, "alice")
    await log_in(page, "alice")
    await page.goto("/#/u/nobody_here")
    await expect(page.get_by_test_id("user-not-found")).to_contain_text(
        "There is no user @nobody_here"
    )


async def test_your_own_page_has_compose_and_no_follow_button(page, http) -> None:
    await sign_up(http, "alice")
    await log_in(page, "alice")
    await page.get_by_test_id("nav-profile").click()
    await expect(page.get_by_test_id("profile")).to_contain_text("This is you")
    await expect(page.get_by_test_id("follow")).to_have_count(0)
    await expect(page.get_by_test_id("compose")).to_be_visible()
