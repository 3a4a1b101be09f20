"""GraphiQL at GET /graphql in a real browser with no internet: every request to a host other
than 127.0.0.1 is aborted, so the page can only work from the vendored assets
(app/api/transports/graphiql.py). The Headers pane authenticates queries (HTTP header) and
subscriptions (the websocket's connection_init payload)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from playwright.async_api import Locator, Page, expect

from app.api.transports.graphiql import GRAPHIQL_ASSETS_PATH, SCRIPTS, STYLESHEETS
from tests.e2e.conftest import Pages
from tests.e2e.ui import picture
from tests.helpers import follow, post, sign_up

SUBSCRIPTION = "subscription {\n  feedUpdates {\n    newPostCount\n    latestPostAt\n  }\n}\n"
LOCAL_HOSTS = {"127.0.0.1"}


async def offline_page(pages: Pages) -> tuple[Page, list[str]]:
    """A page whose requests to anywhere but 127.0.0.1 fail, and the list of those URLs."""
    page = await pages.new()
    blocked: list[str] = []

    async def only_local(route) -> None:
        url = route.request.url
        if urlsplit(url).hostname in LOCAL_HOSTS or url.startswith("data:"):
            await route.continue_()
        else:
            blocked.append(url)
            await route.abort("internetdisconnected")

    await page.route("**/*", only_local)
    return page, blocked


def query_editor(page: Page) -> Locator:
    return page.locator(".graphiql-query-editor .CodeMirror")


def headers_editor(page: Page) -> Locator:
    return page.locator(".graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror")


def result_pane(page: Page) -> Locator:
    return page.locator(".result-window")


async def open_graphiql(page: Page, path: str = "/graphql") -> None:
    await page.goto(path)
    await expect(query_editor(page)).to_be_visible()
    await expect(page.get_by_text("Loading GraphiQL")).to_have_count(0)


async def replace_text(page: Page, editor: Locator, text: str) -> None:
    """Keyboard input into a CodeMirror editor: focus, select all, type over."""
    await editor.click()
    await page.keyboard.press("Control+A")
    await page.keyboard.press("Delete")
    await page.keyboard.insert_text(text)


async def set_headers(page: Page, headers: dict[str, str]) -> None:
    await page.get_by_role("button", name="Headers", exact=True).click()
    await replace_text(page, headers_editor(page), json.dumps(headers))


async def run(page: Page) -> None:
    await page.locator(".graphiql-execute-button").click()


async def test_the_page_loads_nothing_from_outside(http: httpx.AsyncClient) -> None:
    response = await http.get("/graphql", headers={"Accept": "text/html"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert "unpkg" not in page
    assert not re.search(r"(?:src|href)=\"(?:https?:)?//", page)
    for name in (*SCRIPTS, *STYLESHEETS):
        url = re.search(rf'"({re.escape(GRAPHIQL_ASSETS_PATH)}/{re.escape(name)}[^"]*)"', page)
        assert url is not None, name
        asset = await http.get(url.group(1).replace("&amp;", "&"))
        assert asset.status_code == 200, name
    # Only the page's files are served from the assets folder.
    assert (await http.get(f"{GRAPHIQL_ASSETS_PATH}/refresh.sh")).status_code == 404


async def test_graphiql_renders_offline(pages: Pages) -> None:
    page, blocked = await offline_page(pages)
    await open_graphiql(page)
    await expect(page.locator(".graphiql-container")).to_be_visible()
    await expect(page.get_by_role("button", name="Execute query (Ctrl-Enter)")).to_be_visible()
    await expect(query_editor(page)).to_contain_text("Authorization")
    # The schema arrived by introspection: the docs explorer lists the root types.
    await page.get_by_role("button", name="Show Documentation Explorer").click()
    await expect(page.locator(".graphiql-doc-explorer")).to_contain_text("Subscription")
    assert blocked == [], f"the page reached out of 127.0.0.1: {blocked}"


async def test_subscription_authenticated_by_the_headers_pane(
    pages: Pages, http: httpx.AsyncClient, pipeline
) -> None:
    reader = await sign_up(http, "reader")
    author = await sign_up(http, "author")
    await follow(http, reader, "author")
    page, blocked = await offline_page(pages)
    init_payloads: list[object] = []

    def on_socket(socket) -> None:
        def on_frame(frame: str | bytes) -> None:
            message = json.loads(frame)
            if message.get("type") == "connection_init":
                init_payloads.append(message.get("payload"))

        socket.on("framesent", on_frame)

    page.on("websocket", on_socket)
    await open_graphiql(page)

    await replace_text(page, query_editor(page), SUBSCRIPTION)
    await set_headers(page, {"Authorization": f"Bearer {reader}"})
    await run(page)

    result = result_pane(page)
    await expect(result).to_contain_text('"newPostCount": 0')
    assert init_payloads == [{"Authorization": f"Bearer {reader}"}]

    await post(http, author, "live in GraphiQL")
    await pipeline.settle()
    await expect(result).to_contain_text('"newPostCount": 1')
    await expect(result).to_contain_text('"latestPostAt": "20')
    assert blocked == [], f"the page reached out of 127.0.0.1: {blocked}"


async def test_subscription_without_a_token_says_what_to_do(pages: Pages) -> None:
    page, _ = await offline_page(pages)
    await open_graphiql(page)
    await replace_text(page, query_editor(page), SUBSCRIPTION)
    await run(page)
    result = result_pane(page)
    await expect(result).to_contain_text("4403")
    await expect(result).to_contain_text("Headers pane")


async def test_query_with_headers_from_the_link(pages: Pages, http: httpx.AsyncClient) -> None:
    """A shared link fills the editors (URL fragment); the Headers pane's token authenticates
    the HTTP request, and the token is dropped from the address bar."""
    token = await sign_up(http, "gina")
    page, blocked = await offline_page(pages)
    sent_auth: list[str | None] = []

    def on_request(request) -> None:
        if request.method == "POST" and request.url.endswith("/graphql"):
            body = json.loads(request.post_data or "{}")
            if "viewer" in body.get("query", "") and "__schema" not in body.get("query", ""):
                sent_auth.append(request.headers.get("authorization"))

    page.on("request", on_request)
    fragment = urlencode(
        {
            "query": "{ viewer { handle } }",
            "headers": json.dumps({"Authorization": f"Bearer {token}"}),
        }
    )
    await open_graphiql(page, f"/graphql#{fragment}")
    await expect(query_editor(page)).to_contain_text("viewer")
    await page.get_by_role("button", name="Headers", exact=True).click()
    await expect(headers_editor(page)).to_contain_text("Bearer")
    assert "headers" not in urlsplit(page.url).fragment
    assert token not in page.url

    await run(page)
    await expect(result_pane(page)).to_contain_text('"handle": "gina"')
    assert sent_auth == [f"Bearer {token}"]
    assert blocked == [], f"the page reached out of 127.0.0.1: {blocked}"


async def test_query_without_a_token_gets_no_viewer(pages: Pages) -> None:
    page, _ = await offline_page(pages)
    await open_graphiql(page)
    await replace_text(page, query_editor(page), "{ viewer { handle } }")
    await run(page)
    await expect(result_pane(page)).to_contain_text('"viewer": null')


async def test_an_image_post_made_in_graphiql_reaches_a_followers_feed(
    pages: Pages, http: httpx.AsyncClient, pipeline
) -> None:
    """The welcome's example 6 by hand: createUpload in GraphiQL, the PUT to its URL with its
    headers (as curl would), createPost with the upload; the follower's feed query in
    GraphiQL then shows the image, and its URL serves it."""
    author = await sign_up(http, "alice")
    reader = await sign_up(http, "bob")
    await follow(http, reader, "alice")
    image = picture("harbour.png", 72, 40)
    page, blocked = await offline_page(pages)
    await open_graphiql(page)
    await set_headers(page, {"Authorization": f"Bearer {author}"})

    async def answer(text: str) -> dict[str, Any]:
        """Run `text` in the editor; the JSON answer the result pane shows."""
        await replace_text(page, query_editor(page), text)
        async with page.expect_response(
            lambda r: r.url.endswith("/graphql") and "__schema" not in (r.request.post_data or "")
        ) as response:
            await run(page)
        body = await (await response.value).json()
        assert "errors" not in body, body
        return body["data"]

    start = (
        f'mutation {{ createUpload(contentType: "image/png", '
        f"byteSize: {len(image.data)}) {{ id url headers {{ name value }} expiresAt }} }}"
    )
    upload = (await answer(start))["createUpload"]
    await expect(result_pane(page)).to_contain_text('"expiresAt"')
    headers = {h["name"]: h["value"] for h in upload["headers"]}
    assert (await http.put(upload["url"], content=image.data, headers=headers)).status_code == 200
    attach = (
        'mutation { createPost(body: "At the harbour", media: '
        f'[{{uploadId: "{upload["id"]}", alt: "Boats moored at dusk"}}]) '
        "{ id media { url width height contentType alt } } }"
    )
    made = (await answer(attach))["createPost"]
    assert [(m["width"], m["height"]) for m in made["media"]] == [(72, 40)]
    await pipeline.settle()

    await set_headers(page, {"Authorization": f"Bearer {reader}"})
    feed = (
        "{ feed(first: 5) { edges { node { id body "
        "media { url width height contentType alt } } } } }"
    )
    [edge] = (await answer(feed))["feed"]["edges"]
    assert edge["node"]["id"] == made["id"]
    await expect(result_pane(page)).to_contain_text('"alt": "Boats moored at dusk"')
    [media] = edge["node"]["media"]
    width = await page.evaluate(
        "async (url) => (await createImageBitmap(await (await fetch(url)).blob())).width",
        media["url"],
    )
    assert width == 72
    assert blocked == [], f"the page reached out of 127.0.0.1: {blocked}"
