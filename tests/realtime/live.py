"""A real websocket client for realtime tests: `LiveClient` speaks graphql-transport-ws with
the `websockets` package, as a browser would, to a tests.servers.ApiServer; `subscribed_fan`
is the usual start of a test: an author, a follower, and the follower's live socket;
`pull_mode_fan` the same with a PULL-mode author; `sentinel` (`sentinels` for
several sockets) proves that nothing arrived, by the next frame, not by waiting."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from app.operation_documents import operations
from app.posts.ids import created_ms
from tests.helpers import author_with_fans, fanout_mode, follow, make_user, post
from tests.servers import ApiServer

PROTOCOL = "graphql-transport-ws"
FEED_UPDATES = operations()["FeedUpdates"]


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
        await self.ws.send(
            json.dumps({"id": op_id, "type": "subscribe", "payload": {"query": FEED_UPDATES}})
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


async def pull_mode_fan(
    server: ApiServer, http: httpx.AsyncClient, pipeline: Any, text: str
) -> tuple[str, str, LiveClient, int]:
    """Author `celeb` with 10 followers, switched to PULL by a post (the tests' threshold is
    10), the first follower's socket, then the author's post `text` counted on it: (author
    token, fan token, the fan's socket, the post's id)."""
    celeb, _, fans = await author_with_fans(http, 10, author="celeb")
    await post(http, celeb, "now I have 10 followers")  # the split switches to PULL
    await pipeline.settle()
    assert await fanout_mode(http, "celeb") == "PULL"
    live = await LiveClient.open(server, fans[0][0])
    assert (await live.next_update())["newPostCount"] == 0
    post_id = await post(http, celeb, text)
    await pipeline.settle()
    await live.until_count(1)
    return celeb, fans[0][0], live, post_id


def shown(frame: dict[str, Any]) -> tuple[int, int | None]:
    """(newPostCount, latestPostAt in ms) of a feedUpdates frame."""
    at = frame["latestPostAt"]
    ms = None if at is None else round(datetime.fromisoformat(at).timestamp() * 1000)
    return frame["newPostCount"], ms


async def sentinel(
    http: httpx.AsyncClient, pipeline: Any, live: LiveClient, token: str, count: int
) -> None:
    """Someone the viewer follows posts: the very next frame must carry exactly `count` and
    this post's time, so nothing was announced in between (frames of a socket arrive in
    order): "nothing arrived" proven without waiting."""
    await sentinels(http, pipeline, token, (live, count))


async def sentinels(
    http: httpx.AsyncClient, pipeline: Any, token: str, *expected: tuple[LiveClient, int]
) -> None:
    """`sentinel` for several sockets at once: one post by `token`, whom each of them
    follows; each socket's very next frame carries its count and this post's time."""
    post_id = await post(http, token, "sentinel")
    await pipeline.settle()
    for live, count in expected:
        frame = await live.next_update(seconds=5)
        assert shown(frame) == (count, created_ms(post_id)), frame


# -- raw graphql-transport-ws: one message at a time, for the protocol's edge cases --------


async def open_socket(server: ApiServer) -> ClientConnection:
    return await connect(server.ws_url, subprotocols=[PROTOCOL])  # type: ignore[list-item]


async def send(ws: ClientConnection, message: dict[str, Any]) -> None:
    await ws.send(json.dumps(message))


async def receive(ws: ClientConnection, seconds: float = 5.0) -> dict[str, Any]:
    frame = await asyncio.wait_for(ws.recv(), seconds)
    assert isinstance(frame, str), f"a binary frame: {frame!r}"  # the protocol is JSON text
    return dict(json.loads(frame))


async def two_frames(ws: ClientConnection, seconds: float = 10.0) -> list[str]:
    """The next two text frames (one per operation), in a stable order; fails, never hangs."""
    frames = [await asyncio.wait_for(ws.recv(), seconds) for _ in range(2)]
    assert all(isinstance(f, str) for f in frames), frames
    return sorted(str(f) for f in frames)


async def closed_with(ws: ClientConnection, seconds: float = 5.0) -> tuple[int, str]:
    """Read (answering pings) until the server closes; (code, reason). Fails when a frame
    takes longer than `seconds`."""
    with pytest.raises(ConnectionClosed):
        while True:
            frame = await asyncio.wait_for(ws.recv(), seconds)
            if isinstance(frame, str) and json.loads(frame).get("type") == "ping":
                await send(ws, {"type": "pong"})
    assert ws.close_code is not None
    return ws.close_code, ws.close_reason or ""


async def authed(server: ApiServer, token: str) -> ClientConnection:
    ws = await open_socket(server)
    await send(ws, {"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
    assert (await receive(ws))["type"] == "connection_ack"
    return ws


async def run_query(
    ws: ClientConnection, op_id: str, query: str, variables: dict[str, Any]
) -> dict[str, Any]:
    """One query over the socket: its `next` payload (then `complete`)."""
    await send(
        ws, {"id": op_id, "type": "subscribe", "payload": {"query": query, "variables": variables}}
    )
    message = await receive(ws)
    assert message["type"] == "next" and message["id"] == op_id, message
    assert await receive(ws) == {"id": op_id, "type": "complete"}
    return dict(message["payload"])
