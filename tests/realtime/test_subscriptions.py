"""feedUpdates end to end: GraphQL over HTTP to a running uvicorn, the write path through the
outbox relay and real ARQ workers, and a real websocket client speaking graphql-transport-ws.
Conftest shrinks thresholds: an author is in pull mode from 10 followers."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedError

from app.api.documents import operations
from app.realtime.counts import reset_new_post_count
from tests.fanout.helpers import follow, make_user, post
from tests.graphql_client import gql
from tests.realtime.live import PROTOCOL, ApiServer, LiveClient


async def test_follower_is_notified_within_a_second(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        fan, _ = await make_user(http, "fan")
        stranger, _ = await make_user(http, "stranger")
        await follow(http, fan, "author")
        await pipeline.settle()
        live = await LiveClient.open(server, fan)
        other = await LiveClient.open(server, stranger)
        assert (await live.next_update())["newPostCount"] == 0  # the current count, at once
        assert (await other.next_update())["newPostCount"] == 0

        await post(http, author, "hello")
        await pipeline.settle()
        fanned_out = time.monotonic()
        update = await live.next_update(seconds=1.0)
        assert time.monotonic() - fanned_out < 1.0
        assert update["newPostCount"] == 1
        assert update["latestPostAt"] is not None
        await other.silent(0.3)
        await live.close()
        await other.close()


async def test_blocked_user_and_non_follower_get_nothing(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        fan, _ = await make_user(http, "fan")
        blocked, _ = await make_user(http, "blocked")
        await follow(http, fan, "author")
        await follow(http, blocked, "author")
        (await gql(http, "Block", {"handle": "blocked"}, token=author)).ok()
        await pipeline.settle()
        clients = [await LiveClient.open(server, t) for t in (fan, blocked)]
        for client in clients:
            await client.next_update()

        await post(http, author, "not for blocked eyes", visibility="FOLLOWERS")
        await pipeline.settle()
        assert (await clients[0].next_update())["newPostCount"] == 1
        await clients[1].silent(0.3)
        for client in clients:
            await client.close()


async def test_unauthenticated_sockets_are_closed_before_any_data(server: ApiServer) -> None:
    for payload in ({}, {"authorization": "Bearer not-a-token"}, {"authorization": "Basic x"}):
        ws = await connect(server.ws_url, subprotocols=[PROTOCOL])  # type: ignore[list-item]
        await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
        with pytest.raises(ConnectionClosedError):
            await asyncio.wait_for(ws.recv(), 2)
        assert ws.close_code == 4403, payload

    # Subscribing without connection_init is the protocol's 4401.
    ws = await connect(server.ws_url, subprotocols=[PROTOCOL])  # type: ignore[list-item]
    query = operations()["FeedUpdates"]
    await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": query}}))
    with pytest.raises(ConnectionClosedError):
        await asyncio.wait_for(ws.recv(), 2)
    assert ws.close_code == 4401

    # Over HTTP there is no socket to push to.
    async with server.http() as http:
        token, _ = await make_user(http, "httponly")
        result = await gql(http, "FeedUpdates", token=token)
        assert result.errors


async def test_two_api_processes_each_serve_their_own_sockets(
    server: ApiServer, server2: ApiServer, pipeline
) -> None:
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        one, _ = await make_user(http, "one")
        two, _ = await make_user(http, "two")
        await follow(http, one, "author")
        await follow(http, two, "author")
        await pipeline.settle()
        a = await LiveClient.open(server, one)
        b = await LiveClient.open(server2, two)
        await a.next_update()
        await b.next_update()

        await post(http, author, "to both processes")
        await pipeline.settle()
        assert (await a.next_update())["newPostCount"] == 1
        assert (await b.next_update())["newPostCount"] == 1
        await a.close()
        await b.close()


async def test_pull_mode_author_is_announced_once_per_process_to_followers_only(
    server: ApiServer, server2: ApiServer, pipeline
) -> None:
    async with server.http() as http:
        author, _ = await make_user(http, "celeb")
        fans = [await make_user(http, f"fan{i}") for i in range(9)]
        late, _ = await make_user(http, "late")  # blocked by the celebrity once subscribed
        stranger, _ = await make_user(http, "stranger")
        for token, _ in fans:
            await follow(http, token, "celeb")
        await follow(http, late, "celeb")
        await post(http, author, "now I have 10 followers")  # the split switches to PULL
        await pipeline.settle()
        profile = (await gql(http, "UserProfile", {"handle": "celeb"})).ok()
        assert profile["user"]["fanoutMode"] == "PULL"

        here = await LiveClient.open(server, fans[0][0])
        there = await LiveClient.open(server2, fans[1][0])
        blocked = await LiveClient.open(server, late)
        nobody = await LiveClient.open(server, stranger)
        clients = [here, there, blocked, nobody]
        for client in clients:
            assert (await client.next_update())["newPostCount"] == 0
        # The hub learnt at subscribe time that `late` follows celeb; the block must win.
        (await gql(http, "Block", {"handle": "late"}, token=author)).ok()

        await post(http, author, "followers only", visibility="FOLLOWERS")
        await pipeline.settle()
        assert (await here.next_update())["newPostCount"] == 1
        assert (await there.next_update())["newPostCount"] == 1
        await blocked.silent(0.3)
        await nobody.silent(0.1)
        await here.silent(0.1)  # exactly one frame: one message per post, not per follower

        await post(http, author, "private", visibility="PRIVATE")
        await pipeline.settle()
        for client in clients:
            await client.silent(0.2)

        # Offline pull-mode posts are counted when the follower comes back.
        await there.close()
        await post(http, author, "while you were away")
        await pipeline.settle()
        back = await LiveClient.open(server2, fans[1][0])
        assert (await back.next_update())["newPostCount"] == 2
        for client in (here, blocked, nobody, back):
            await client.close()


async def test_a_burst_is_coalesced_into_a_few_frames(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        fan, _ = await make_user(http, "fan")
        await follow(http, fan, "author")
        await pipeline.settle()
        live = await LiveClient.open(server, fan)
        await live.next_update()
        for i in range(50):
            await post(http, author, f"burst {i}")
        await pipeline.settle()
        frames = await live.until_count(50, seconds=5)
        counts = [f["newPostCount"] for f in frames]
        assert counts == sorted(counts)  # a running count, never going back
        assert len(frames) <= 12, counts
        await live.silent(0.4)
        await live.close()


async def test_reconnect_gets_the_current_count_and_reset_clears_it(
    server: ApiServer, server2: ApiServer, pipeline, state
) -> None:
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        fan, fan_id = await make_user(http, "fan")
        await follow(http, fan, "author")
        await pipeline.settle()
        live = await LiveClient.open(server, fan)
        await live.next_update()
        for i in range(3):
            await post(http, author, f"seen live {i}")
        await pipeline.settle()
        await live.until_count(3)
        await live.close()

        for i in range(2):
            await post(http, author, f"while away {i}")
        await pipeline.settle()
        live = await LiveClient.open(server, fan)
        other_tab = await LiveClient.open(server2, fan)
        assert (await live.next_update())["newPostCount"] == 5
        assert (await other_tab.next_update())["newPostCount"] == 5

        await reset_new_post_count(state.redis, fan_id)
        assert (await live.next_update())["newPostCount"] == 0
        assert (await other_tab.next_update())["newPostCount"] == 0
        await live.close()
        await other_tab.close()
        live = await LiveClient.open(server, fan)
        update = await live.next_update()
        assert update == {"newPostCount": 0, "latestPostAt": None}
        await live.close()


async def test_reading_the_first_feed_page_resets_the_count(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        fan, _ = await make_user(http, "fan")
        await follow(http, fan, "author")
        await pipeline.settle()
        live = await LiveClient.open(server, fan)
        await live.next_update()
        await post(http, author, "news")
        await pipeline.settle()
        assert (await live.next_update())["newPostCount"] == 1
        (await gql(http, "Feed", {"first": 10}, token=fan)).ok()
        assert (await live.next_update())["newPostCount"] == 0
        await live.close()


async def test_a_long_absence_is_caught_up_from_the_timeline(
    server: ApiServer, pipeline, state
) -> None:
    """Offline users get no count writes during fan-out; subscribing rebuilds the count."""
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        fan, fan_id = await make_user(http, "fan")
        await follow(http, fan, "author")
        await pipeline.settle()
        live = await LiveClient.open(server, fan)
        assert (await live.next_update())["newPostCount"] == 0
        await live.close()
        # Long gone: no hub has held a socket of the fan within the grace period.
        from app.realtime.keys import Channels
        from app.realtime.settings import get_realtime_settings

        namespace = get_realtime_settings().namespace
        online = Channels.for_redis(state.redis, namespace).online_key
        await state.redis.zadd(online, {str(fan_id): 1})
        for i in range(4):
            await post(http, author, f"while long away {i}")
        await pipeline.settle()
        assert not await state.redis.exists(f"fu:{{{fan_id}}}") or (
            await state.redis.zcard(f"fu:{{{fan_id}}}") == 0
        )
        live = await LiveClient.open(server, fan)
        assert (await live.next_update())["newPostCount"] == 4
        await live.close()
