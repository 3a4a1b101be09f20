"""A real websocket client for realtime tests: `LiveClient` speaks graphql-transport-ws with
the `websockets` package, as a browser would, to a tests.servers.ApiServer; `subscribed_fan`
is the usual start of a test: an author, a follower, and the follower's live socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from app.api.documents import operations
from tests.helpers import follow, make_user
from tests.servers import ApiServer

PROTOCOL = "graphql-transport-ws"


class LiveClient:
    """One websocket with (optionally) one `feedUpdates` subscription."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @classmethod
    async def open(
        cls, server: ApiServer, token: str | None, *, subscribe: bool = True, **kwargs: Any
    ) -> LiveClient:
        ws = await connect(server.ws_url, subprotocols=[PROTOCOL], **kwargs)  # type: ignore[list-item]
        client = cls(ws)
        payload = {"authorization": f"Bearer {token}"} if token else {}
        await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
        ack = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert ack["type"] == "connection_ack", ack
        if subscribe:
            await client.subscribe()
        return client

    async def subscribe(self, op_id: str = "1") -> None:
        query = operations()["FeedUpdates"]
        await self.ws.send(
            json.dumps({"id": op_id, "type": "subscribe", "payload": {"query": query}})
        )

    async def next_update(self, seconds: float = 1.0) -> dict[str, Any]:
        """The next feedUpdates payload; fails after `seconds`."""
        while True:
            message = json.loads(await asyncio.wait_for(self.ws.recv(), seconds))
            if message["type"] == "ping":
                await self.ws.send(json.dumps({"type": "pong"}))
                continue
            assert message["type"] == "next", message
            assert "errors" not in message["payload"], message
            return dict(message["payload"]["data"]["feedUpdates"])

    async def until_count(self, count: int, seconds: float = 5.0) -> list[dict[str, Any]]:
        """Frames received until one carries `count` (all of them, that one last)."""
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + seconds
        while not frames or frames[-1]["newPostCount"] != count:
            frames.append(await self.next_update(max(0.01, deadline - time.monotonic())))
        return frames

    async def silent(self, within: float = 0.5) -> None:
        """Nothing arrives for `within` seconds."""
        try:
            message = await asyncio.wait_for(self.ws.recv(), within)
        except TimeoutError:
            return
        raise AssertionError(f"unexpected frame: {message!r}")

    async def close(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.ws.close()


@dataclass
class Fan:
    token: str
    id: int
    authors: dict[str, str]  # the followed users' tokens by handle
    live: LiveClient  # the fan's socket, its first frame (count 0) read

    @property
    def author(self) -> str:
        """The token of the first (or only) followed user."""
        return next(iter(self.authors.values()))


async def subscribed_fan(
    server: ApiServer,
    http: httpx.AsyncClient,
    pipeline: Any,
    follows: Sequence[str] = ("author",),
) -> Fan:
    """The users `follows`, user `fan` following each of them (fan-out settled), and the
    fan's socket subscribed to feedUpdates."""
    authors = {handle: (await make_user(http, handle))[0] for handle in follows}
    token, fan_id = await make_user(http, "fan")
    for handle in follows:
        await follow(http, token, handle)
    await pipeline.settle()
    live = await LiveClient.open(server, token)
    assert (await live.next_update())["newPostCount"] == 0  # the current count, at once
    return Fan(token, fan_id, authors, live)
