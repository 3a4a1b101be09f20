"""The websocket's life as the page shows it: live, dropped (visibly reconnecting, with
backoff), and live again; a server that breaks the protocol (binary frames) is not papered
over; and what clicking "N new posts" shows. Needs the `feedUpdates` subscription."""

from __future__ import annotations

import contextlib
import json

import pytest
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from playwright.async_api import expect

from tests.e2e.ui import (
    feed_post,
    log_in,
    open_with_token,
    record_feed_requests,
    scroll_to_end,
)
from tests.helpers import create_post, follow, gql, post, sign_up
from tests.servers import ApiServer


async def test_a_dropped_socket_shows_reconnecting_then_recovers(
    pages, http, pipeline, test_database
) -> None:
    # A server of its own, so stopping it disturbs no other test.
    async with ApiServer() as server:
        reader = await sign_up(http, "reader")
        author = await sign_up(http, "author")
        await follow(http, reader, "author")
        page = await pages.new(server=server)
        await log_in(page, "reader")
        status = page.get_by_test_id("live-status")
        await expect(status).to_have_attribute("data-state", "live")

        server.stop()
        await expect(status).to_have_attribute("data-state", "reconnecting")
        bar = page.get_by_test_id("live-bar")
        await expect(bar).to_be_visible()
        await expect(bar).to_contain_text("Reconnecting to live updates")
        await expect(bar).to_contain_text("Next try in")

        await server.start()  # same port
        # "Retry now", unless the page's own backoff timer retried first while the server
        # was starting (under load that start can outlast the 1-2 s wait): then it is gone.
        with contextlib.suppress(PlaywrightTimeoutError):
            await page.get_by_test_id("live-retry").click(timeout=3_000)
        await expect(status).to_have_attribute("data-state", "live", timeout=20_000)
        await expect(bar).to_be_hidden()

        # And it works again: the next post is announced.
        await post(http, author, "after the outage")
        await pipeline.settle()
        await expect(page.get_by_test_id("new-posts-banner")).to_contain_text("1 new post")


async def test_a_binary_frame_is_a_protocol_error_not_decoded(page, http) -> None:
    """graphql-transport-ws messages are text frames. If the server ever sends JSON as a
    binary frame again, the page must fail visibly (as standard clients do), not decode it."""
    await sign_up(http, "reader")
    frames: dict[str, bool] = {"binary": True}

    async def fake_server(ws) -> None:
        def on_message(message: str | bytes) -> None:
            kind = json.loads(message)["type"]
            if kind == "connection_init":
                ack = json.dumps({"type": "connection_ack"})
                ws.send(ack.encode() if frames["binary"] else ack)

        ws.on_message(on_message)

    await page.route_web_socket("**/graphql", fake_server)
    await log_in(page, "reader")
    status = page.get_by_test_id("live-status")
    await expect(status).to_have_attribute("data-state", "reconnecting")
    bar = page.get_by_test_id("live-bar")
    await expect(bar).to_contain_text("Protocol error")
    await expect(bar).to_contain_text("binary frame")

    frames["binary"] = False  # the same server sending text frames: live
    # "Retry now", unless the page's own backoff timer retried first (under load the 1-2 s
    # wait can pass before the click): then the button is already gone.
    with contextlib.suppress(PlaywrightTimeoutError):
        await page.get_by_test_id("live-retry").click(timeout=3_000)
    await expect(status).to_have_attribute("data-state", "live", timeout=20_000)
    await expect(bar).to_be_hidden()


OLDER = 12  # posts already in the feed, each liked: a new post (no likes) ranks below them
# (when all are seen: unseen posts rank first, app/feed/impressions.py)


@pytest.mark.parametrize(
    ("mode", "page_size"),
    [
        ("RANKED", 20),  # the new post is on the refreshed first page, ranked ~13th
        ("RANKED", 5),  # ... or on its third page: the page fetches the newest posts too
        ("CHRONOLOGICAL", 5),  # it is on top anyway: same mark, same paging
    ],
)
async def test_new_posts_are_on_top_after_the_banner_click(
    page, http, pipeline, mode: str, page_size: int
) -> None:
    reader = await sign_up(http, "reader")
    authors = {h: await sign_up(http, h) for h in ("ana", "ben", "dan")}
    fans = [await sign_up(http, f"fan{i}") for i in range(2)]
    for handle in authors:
        await follow(http, reader, handle)
    older = []
    for i in range(OLDER):
        body = f"older post {i:02d}"
        made = await create_post(http, authors[("ana", "ben")[i % 2]], body)
        for fan in fans:  # engagement (not the reader's: no affinity either way)
            (await gql(http, "LikePost", {"id": made["id"]}, token=fan)).ok()
        older.append(body)
    await pipeline.settle()

    await page.add_init_script(f"localStorage.setItem('hybridfeed.mode', {json.dumps(mode)})")
    sent = record_feed_requests(page)
    await open_with_token(page, reader, f"/?first={page_size}#/")
    posts = page.get_by_test_id("feed").get_by_test_id("post")
    await expect(posts.first).to_be_visible()
    await expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "live")

    fresh = "dan: just landed in Lisbon"
    fresh_id = await post(http, authors["dan"], fresh)
    # As if another device of the reader's had shown it: seen like the older posts, so the
    # ranking's unseen-first rule (impressions) does not lift it and it ranks low on merit.
    reported = {"postIds": [str(fresh_id)]}
    (await gql(http, "ReportImpressions", reported, token=reader)).ok()
    await pipeline.settle()
    banner = page.get_by_test_id("new-posts-banner")
    await expect(banner).to_contain_text("1 new post")
    await page.mouse.wheel(0, 700)  # reading further down; the banner stays in view
    before = len(sent)
    await banner.click()

    # The new post is the first post of the list, marked, and on screen.
    await expect(banner).to_be_hidden()
    await expect(posts.first).to_contain_text(fresh)
    await expect(posts.first).to_have_attribute("data-new", "true")
    await expect(posts.first.get_by_test_id("post-new")).to_have_text("New")
    await expect(posts.first).to_be_in_viewport()
    await expect(page.locator('[data-testid="post"][data-new="true"]')).to_have_count(1)

    # Paging on from the server's cursor: every post once, the moved one not again.
    await scroll_to_end(page)
    bodies = await page.get_by_test_id("feed").get_by_test_id("post-body").all_inner_texts()
    assert bodies[0] == fresh
    assert sorted(bodies) == sorted([*older, fresh]), bodies
    await expect(feed_post(page, fresh)).to_have_count(1)
    await expect(page.get_by_test_id("feed-footer")).to_have_attribute("data-count", str(OLDER + 1))
    await expect(page.get_by_test_id("feed-meta")).not_to_contain_text("repeated")
    # One new first page in the list's mode; the rest of the list's reads page on from it.
    firsts = [v for v in sent[before:] if v.get("after") is None]
    assert firsts[0] == {"first": page_size, "after": None, "mode": mode}, firsts
    extra = firsts[1:]

    # The server does rank it low: the click, not the ranking, put it on top.
    ranked = (await gql(http, "Feed", {"first": 20, "mode": mode}, token=reader)).ok()
    order = [e["node"]["body"] for e in ranked["feed"]["edges"]]
    if mode == "RANKED":
        assert order.index(fresh) >= OLDER // 2, order  # below the fold
    else:
        assert order.index(fresh) == 0
    # Past the first page, the page read the newest posts once more to find it; else not.
    if order.index(fresh) >= page_size:
        assert extra == [{"first": 11, "after": None, "mode": "CHRONOLOGICAL"}], extra
    else:
        assert extra == [], extra
