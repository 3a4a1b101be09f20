"""The bare-handler anchor (benchmarks/anchor_server.py) serves the product's page: for the
same viewer and cursor, its next pages are the product's bytes (so a benchmark ratio to it
compares the same work), and its first pages the product's page in the same shape."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from app.operation_documents import document_id, operations
from benchmarks.anchor_server import Anchor
from tests.api.fast.differential import build_world


async def _page(client: httpx.AsyncClient, token: str, variables: dict[str, Any]) -> bytes:
    body = {"documentId": document_id(operations()["Feed"]), "variables": variables}
    reply = await client.post(
        "/graphql",
        content=orjson.dumps(body),
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"},
    )
    assert reply.status_code == 200
    return reply.content


async def test_anchor_next_pages_are_the_products_bytes(client, state, pipeline) -> None:
    world = await build_world(client, pipeline, seed=17)
    anchor = Anchor()
    await anchor.open(state.settings, state)
    transport = httpx.ASGITransport(app=anchor)
    compared = posts = 0
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://anchor") as bare:
            for handle in world.handles:
                token = world.tokens[handle]
                first = orjson.loads(await _page(client, token, {"first": 4}))["data"]["feed"]
                after = first["pageInfo"]["endCursor"]
                while after is not None:
                    variables = {"first": 4, "after": after}
                    product = await _page(client, token, variables)
                    assert await _page(bare, token, variables) == product, handle
                    page = orjson.loads(product)["data"]["feed"]
                    compared += 1
                    posts += len(page["edges"])
                    after = (
                        page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
                    )
                # A first page from the anchor: the product's service, the same shape.
                own = orjson.loads(await _page(bare, token, {"first": 4}))["data"]["feed"]
                assert own.keys() == first.keys()
                assert own["pageInfo"].keys() == first["pageInfo"].keys()
                for mine, theirs in zip(own["edges"], first["edges"], strict=False):
                    assert mine["node"].keys() == theirs["node"].keys()
                    assert mine["node"]["author"].keys() == theirs["node"]["author"].keys()
    finally:
        await anchor.close()
    assert compared >= len(world.handles) and posts > 3 * compared, (compared, posts)
