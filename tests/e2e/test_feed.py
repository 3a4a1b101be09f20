"""The home feed in a real browser: live banner and refresh, infinite scroll over the opaque
cursor, delete, RANKED/CHRONOLOGICAL, and CURSOR_EXPIRED. These need the `feed` query (and
the banner test the `feedUpdates` subscription) on the server."""

from __future__ import annotations

import json

from playwright.async_api import expect

from tests.e2e.ui import (
    FEED_OPERATIONS,
    feed_post,
    graphql_error,
    log_in,
    operation_of,
    record_feed_requests,
    scroll_to_end,
)
from tests.helpers import eventually, follow, post, sign_up


async def test_new_posts_banner_then_refresh_shows_them(page, http, pipeline) -> None:
    reader = await sign_up(http, "reader")
    author = await sign_up(http, "author", name="Ann Author")
    await follow(http, reader, "author")
    await post(http, author, "an older post")
    await pipeline.settle()

    await log_in(page, "reader")
    await expect(feed_post(page, "an older post")).to_be_visible()
    await expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "live")
    banner = page.get_by_test_id("new-posts-banner")
    await expect(banner).to_be_hidden()

    await post(http, author, "breaking: fresh sourdough")
    await pipeline.settle()
    await expect(banner).to_be_visible()
    await expect(banner).to_contain_text("1 new post")
    # New posts appear on refresh, not in the middle of what you are reading.
    await expect(feed_post(page, "breaking: fresh sourdough")).to_have_count(0)

    await post(http, author, "and a second one")
    await pipeline.settle()
    await expect(banner).to_contain_text("2 new posts")
    await expect(page.get_by_test_id("nav-new-count")).to_have_text("2")

    await banner.click()
    await expect(feed_post(page, "breaking: fresh sourdough")).to_be_visible()
    await expect(feed_post(page, "and a second one")).to_be_visible()
    await expect(feed_post(page, "an older post")).to_be_visible()
    await expect(banner).to_be_hidden()


async def test_scroll_three_pages_over_the_cursor(page, http, pipeline) -> None:
    reader = await sign_up(http, "reader")
    made: list[str] = []
    tokens = {h: await sign_up(http, h) for h in ("ana", "ben", "cai")}
    for handle in tokens:
        await follow(http, reader, handle)
    for i in range(45):  # pages of 20: 20 + 20 + 5
        handle = ("ana", "ben", "cai")[i % 3]
        body = f"post number {i:02d} by {handle}"
        await post(http, tokens[handle], body)
        made.append(body)
    await pipeline.settle()

    await page.add_init_script("localStorage.setItem('hybridfeed.mode', 'CHRONOLOGICAL')")
    sent = record_feed_requests(page)
    await log_in(page, "reader")
    await expect(page.get_by_test_id("mode-CHRONOLOGICAL")).to_have_attribute(
        "aria-pressed", "true"
    )
    await expect(page.get_by_test_id("feed").get_by_test_id("post")).to_have_count(20)

    await scroll_to_end(page)
    footer = page.get_by_test_id("feed-footer")
    await expect(footer).to_have_attribute("data-pages", "3")
    await expect(footer).to_have_attribute("data-count", "45")
    await expect(page.get_by_test_id("end-of-list")).to_be_visible()
    await expect(page.get_by_test_id("feed-meta")).not_to_contain_text("repeated")

    bodies = await page.get_by_test_id("feed").get_by_test_id("post-body").all_inner_texts()
    assert bodies == list(reversed(made)), "chronological: newest first, none lost or repeated"
    # The page passed back exactly the opaque cursors it was given, one page at a time.
    assert [v.get("after") is None for v in sent] == [True, False, False]
    assert {v["mode"] for v in sent} == {"CHRONOLOGICAL"}


async def test_ranked_scroll_shows_every_post_once_and_the_switch_sticks(
    page, http, pipeline
) -> None:
    reader = await sign_up(http, "reader")
    tokens = {h: await sign_up(http, h) for h in ("ana", "ben", "cai")}
    for handle in tokens:
        await follow(http, reader, handle)
    made = set()
    for i in range(45):
        handle = ("ana", "ben", "cai")[i % 3]
        await post(http, tokens[handle], f"ranked {i:02d} {handle}")
        made.add(f"ranked {i:02d} {handle}")
    await pipeline.settle()

    sent = record_feed_requests(page)
    await log_in(page, "reader")
    await expect(page.get_by_test_id("mode-RANKED")).to_have_attribute("aria-pressed", "true")
    await scroll_to_end(page)
    bodies = await page.get_by_test_id("feed").get_by_test_id("post-body").all_inner_texts()
    assert sorted(bodies) == sorted(made)
    await expect(page.get_by_test_id("feed-footer")).to_have_attribute("data-pages", "3")
    assert {v["mode"] for v in sent} == {"RANKED"}

    await page.get_by_test_id("mode-CHRONOLOGICAL").click()
    await expect(page.get_by_test_id("feed-footer")).to_have_attribute("data-pages", "1")
    assert sent[-1] == {"first": 20, "after": None, "mode": "CHRONOLOGICAL"}
    await page.reload()
    await expect(page.get_by_test_id("mode-CHRONOLOGICAL")).to_have_attribute(
        "aria-pressed", "true"
    )


async def test_delete_hides_the_post(pages, http, pipeline) -> None:
    author = await sign_up(http, "author")
    reader = await sign_up(http, "reader")
    await follow(http, reader, "author")
    await post(http, author, "this one stays")
    await post(http, author, "regrettable take")
    await pipeline.settle()

    reader_page = await pages.new()
    await log_in(reader_page, "reader")
    await expect(feed_post(reader_page, "regrettable take")).to_be_visible()

    author_page = await pages.new()
    await log_in(author_page, "author")
    card = feed_post(author_page, "regrettable take")  # read-your-writes: your own posts
    await card.get_by_test_id("post-menu").click()
    await card.get_by_test_id("post-delete").click()
    await card.get_by_test_id("post-delete-confirm").click()
    await expect(card).to_have_count(0)
    await expect(
        author_page.get_by_test_id("toast").filter(has_text="Post deleted")
    ).to_be_visible()
    await pipeline.settle()

    await author_page.reload()
    await expect(feed_post(author_page, "this one stays")).to_be_visible()
    await expect(feed_post(author_page, "regrettable take")).to_have_count(0)

    # The reader refreshes: the tombstone applies at once.
    await reader_page.get_by_test_id("refresh").click()
    await expect(feed_post(reader_page, "this one stays")).to_be_visible()
    await expect(feed_post(reader_page, "regrettable take")).to_have_count(0)


async def test_your_new_post_is_in_your_feed_at_once(page, http) -> None:
    await sign_up(http, "alice")
    await log_in(page, "alice")
    await page.get_by_test_id("compose-body").fill("read your writes")
    await page.get_by_test_id("compose-submit").click()
    await expect(feed_post(page, "read your writes")).to_be_visible()
    await page.reload()  # not just the local copy: the server's next first page has it too
    await expect(feed_post(page, "read your writes")).to_be_visible()


async def test_an_expired_cursor_restarts_from_the_top(page, http, pipeline) -> None:
    reader = await sign_up(http, "reader")
    author = await sign_up(http, "author")
    await follow(http, reader, "author")
    for i in range(30):
        await post(http, author, f"item {i:02d}")
    await pipeline.settle()

    expired = []

    async def answer(route) -> None:
        variables = json.loads(route.request.post_data or "{}").get("variables") or {}
        if operation_of(route) in FEED_OPERATIONS and variables.get("after") and not expired:
            expired.append(variables["after"])
            message = "Your feed session expired; reload the feed from the top."
            await route.fulfill(
                status=200,
                content_type="application/json",
                body=graphql_error("CURSOR_EXPIRED", message),
            )
        else:
            await route.continue_()

    sent = record_feed_requests(page)
    await page.route("**/graphql", answer)
    await log_in(page, "reader")
    await expect(page.get_by_test_id("feed").get_by_test_id("post")).to_have_count(20)
    await page.mouse.wheel(0, 6000)

    toast = page.get_by_test_id("toast").filter(has_text="Feed session expired")
    await expect(toast).to_have_attribute("data-code", "CURSOR_EXPIRED")
    await expect(toast).to_contain_text("starts again from the top")
    # A new first page was read (never the old position applied to a new ranking)...
    await eventually(lambda: [v.get("after") is None for v in sent][:3] == [True, False, True])
    # ...and scrolling goes on from there.
    await scroll_to_end(page)
    await expect(page.get_by_test_id("feed-footer")).to_have_attribute("data-count", "30")
