"""The websocket's life as the page shows it: live, dropped (visibly reconnecting, with
backoff), and live again. Needs the `feedUpdates` subscription on the server."""

from __future__ import annotations

from playwright.async_api import expect

from tests.e2e.conftest import ServerProcess
from tests.e2e.helpers import follow, log_in, make_user, post


async def test_a_dropped_socket_shows_reconnecting_then_recovers(
    pages, http, pipeline, test_database
) -> None:
    # A server of its own, so stopping it disturbs no other test.
    server = ServerProcess()
    server.start()
    try:
        reader = await make_user(http, "reader")
        author = await make_user(http, "author")
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

        server.start()  # same port
        await page.get_by_test_id("live-retry").click()
        await expect(status).to_have_attribute("data-state", "live", timeout=20_000)
        await expect(bar).to_be_hidden()

        # And it works again: the next post is announced.
        await post(http, author, "after the outage")
        await pipeline.settle()
        await expect(page.get_by_test_id("new-posts-banner")).to_contain_text("1 new post")
    finally:
        server.stop()
