"""The demo page names its operations by their trusted-document ids (docs/API.md, "Trusted
documents"), over HTTP and the websocket, falls back to the text when the server does not
know an id, and works against a server that accepts registered documents only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.async_api import Route, expect

from app.api.transports.trusted import MANIFEST_PATH
from app.operation_documents import document_id, operations
from tests.e2e.conftest import Pages
from tests.e2e.ui import feed_post, log_in
from tests.helpers import follow, post, sign_up
from tests.servers import ApiServer


def record(page: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every POST /graphql body and every websocket `subscribe` payload the page sends."""
    posts: list[dict[str, Any]] = []
    subscribes: list[dict[str, Any]] = []

    def on_request(request: Any) -> None:
        if request.url.endswith("/graphql") and request.method == "POST":
            posts.append(json.loads(request.post_data or "{}"))

    def on_frame(payload: str | bytes) -> None:
        message = json.loads(payload)
        if message.get("type") == "subscribe":
            subscribes.append(message["payload"])

    page.on("request", on_request)
    page.on("websocket", lambda ws: ws.on("framesent", on_frame))
    return posts, subscribes


async def test_the_page_sends_document_ids_not_texts(page, http) -> None:
    await sign_up(http, "reader")
    await sign_up(http, "writer")
    posts, subscribes = record(page)
    await log_in(page, "reader")
    await expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "live")

    assert {p["operationName"] for p in posts} >= {"LogIn", "FeedWithReasons", "ViewerSettings"}
    for body in posts:
        name = body["operationName"]
        assert "query" not in body, name
        assert body["documentId"] == document_id(operations()[name]), name
    assert subscribes, "no subscribe sent"
    assert subscribes[-1]["documentId"] == document_id(operations()["FeedUpdates"])
    assert "query" not in subscribes[-1]


@pytest.mark.parametrize("stale", ["FeedWithReasons", "FeedUpdates"])
async def test_an_unknown_id_falls_back_to_the_text(page, http, pipeline, stale: str) -> None:
    """A server restarted with other documents does not know the page's id of `stale`: the
    page sends its text instead (over HTTP for FeedWithReasons, the RANKED home feed's read;
    over the websocket for FeedUpdates)."""
    reader = await sign_up(http, "reader")
    writer = await sign_up(http, "writer")
    await follow(http, reader, "writer")
    await post(http, writer, "a post the feed shows")
    await pipeline.settle()
    ids = {name: document_id(text) for name, text in operations().items()}
    ids[stale] = document_id(operations()[stale] + " ")  # one the server never registered

    async def stale_ids(route: Route) -> None:
        await route.fulfill(status=200, content_type="application/json", body=json.dumps(ids))

    await page.route(f"**{MANIFEST_PATH}", stale_ids)
    posts, subscribes = record(page)
    await log_in(page, "reader")
    await expect(feed_post(page, "a post the feed shows")).to_be_visible()
    await expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "live")

    if stale == "FeedWithReasons":
        sent = [p for p in posts if p["operationName"] == stale]
        assert sent[0].get("documentId") == ids[stale] and "query" not in sent[0]
        assert sent[1].get("query") == operations()[stale] and "documentId" not in sent[1]
        assert sent[1]["variables"] == sent[0]["variables"]
    else:
        assert subscribes[0].get("documentId") == ids["FeedUpdates"]
        assert subscribes[1].get("query") == operations()["FeedUpdates"]


async def test_the_page_works_with_registered_documents_only(
    pages: Pages, trusted_server: ApiServer, pipeline: Any
) -> None:
    async with trusted_server.http() as http:
        reader = await sign_up(http, "reader")
        writer = await sign_up(http, "writer")
        await follow(http, reader, "writer")
        await post(http, writer, "only trusted documents here")
    await pipeline.settle()
    page = await pages.new(server=trusted_server)
    await log_in(page, "reader")
    await expect(feed_post(page, "only trusted documents here")).to_be_visible()
    await expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "live")
