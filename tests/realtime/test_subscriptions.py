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

from app.operation_documents import operations
from app.realtime.counts import reset_new_post_count
from app.realtime.keys import Channels, count_key
from tests import helpers
from tests.helpers import (
    author_with_fans,
    block,
    follow,
    gql,
    make_user,
    post,
)
from tests.realtime.live import PROTOCOL, LiveClient, sentinel, sentinels, subscribed_fan
from tests.servers import ApiServer


async def test_follower_is_notified_within_a_second(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        live = fan.live
        stranger, _ = await make_user(http, "stranger")
        friend, _ = await make_user(http, "friend")  # the stranger's sentinel
        await follow(http, stranger, "friend")
        other = await LiveClient.open(server, stranger)
        assert (await other.next_update())["newPostCount"] == 0

        await post(http, fan.author, "hello")
        await pipeline.settle()
        fanned_out = time.monotonic()
        update = await live.next_update(seconds=1.0)
        assert time.monotonic() - fanned_out < 1.0
        assert update["newPostCount"] == 1
        assert update["latestPostAt"] is not None
        await sentinel(http, pipeline, other, friend, 1)  # the author's post: not announced
        await live.close()
        await other.close()


async def test_blocked_user_and_non_follower_get_nothing(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        author, _, [(fan, _), (blocked, _)] = await author_with_fans(http, ["fan", "blocked"])
        friend, _ = await make_user(http, "friend")  # the blocked user's sentinel
        await follow(http, blocked, "friend")
        await block(http, author, "blocked")
        await pipeline.settle()
        clients = [await LiveClient.open(server, t) for t in (fan, blocked)]
        for client in clients:
            await client.next_update()

        await post(http, author, "not for blocked eyes", visibility="FOLLOWERS")
        await pipeline.settle()
        assert (await clients[0].next_update())["newPostCount"] == 1
        await sentinel(http, pipeline, clients[1], friend, 1)
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
        author, _, [(one, _), (two, _)] = await author_with_fans(http, ["one", "two"])
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
        author, _, fans = await author_with_fans(http, 9, author="celeb")
        late, _ = await make_user(http, "late")  # blocked by the celebrity once subscribed
        stranger, _ = await make_user(http, "stranger")
        pal, _ = await make_user(http, "pal")  # everyone's sentinel but the celebrity's
        for token in (fans[0][0], fans[1][0], late, stranger):
            await follow(http, token, "pal")
        await follow(http, late, "celeb")
        await post(http, author, "now I have 10 followers")  # the split switches to PULL
        await pipeline.settle()
        assert await helpers.fanout_mode(http, "celeb") == "PULL"

        here = await LiveClient.open(server, fans[0][0])
        there = await LiveClient.open(server2, fans[1][0])
        blocked = await LiveClient.open(server, late)
        nobody = await LiveClient.open(server, stranger)
        clients = [here, there, blocked, nobody]
        for client in clients:
            assert (await client.next_update())["newPostCount"] == 0
        # The hub learnt at subscribe time that `late` follows celeb; the block must win.
        await block(http, author, "late")

        await post(http, author, "followers only", visibility="FOLLOWERS")
        await pipeline.settle()
        assert (await here.next_update())["newPostCount"] == 1
        assert (await there.next_update())["newPostCount"] == 1
        # Nothing for the blocked and the stranger, and exactly one frame for each follower:
        # one message per post, not per follower. Proven by the sentinel's frame coming next.
        await sentinels(http, pipeline, pal, (here, 2), (there, 2), (blocked, 1), (nobody, 1))

        await post(http, author, "private", visibility="PRIVATE")
        await pipeline.settle()
        await sentinels(http, pipeline, pal, (here, 3), (there, 3), (blocked, 2), (nobody, 2))

        # Offline pull-mode posts are counted when the follower comes back.
        await there.close()
        await post(http, author, "while you were away")
        await pipeline.settle()
        back = await LiveClient.open(server2, fans[1][0])
        # The followers-only post, the pal's two and the one posted while away.
        assert (await back.next_update())["newPostCount"] == 4
        for client in (here, blocked, nobody, back):
            await client.close()


async def test_a_burst_is_coalesced_into_a_few_frames(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        started = time.monotonic()
        for i in range(50):
            await post(http, fan.author, f"burst {i}")
        await pipeline.settle()
        frames = await fan.live.until_count(50, seconds=5)
        span = time.monotonic() - started
        counts = [f["newPostCount"] for f in frames]
        assert counts == sorted(counts)  # a running count, never going back
        # At most one frame per REALTIME_COALESCE_MS (250) while the burst lasts, and the first
        # at once: ~10 frames for the ~2 s a quiet machine takes, not one per post.
        assert len(frames) <= 2 + span / 0.25, (counts, span)
        assert len(frames) < 50, counts
        await sentinel(http, pipeline, fan.live, fan.author, 51)  # nothing after the burst
        await fan.live.close()


async def test_reconnect_gets_the_current_count_and_reset_clears_it(
    server: ApiServer, server2: ApiServer, pipeline, state
) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        for i in range(3):
            await post(http, fan.author, f"seen live {i}")
        await pipeline.settle()
        await fan.live.until_count(3)
        await fan.live.close()

        for i in range(2):
            await post(http, fan.author, f"while away {i}")
        await pipeline.settle()
        live = await LiveClient.open(server, fan.token)
        other_tab = await LiveClient.open(server2, fan.token)
        assert (await live.next_update())["newPostCount"] == 5
        assert (await other_tab.next_update())["newPostCount"] == 5

        await reset_new_post_count(state.redis, state.settings, fan.id)
        assert (await live.next_update())["newPostCount"] == 0
        assert (await other_tab.next_update())["newPostCount"] == 0
        await live.close()
        await other_tab.close()
        live = await LiveClient.open(server, fan.token)
        update = await live.next_update()
        assert update == {"newPostCount": 0, "latestPostAt": None}
        await live.close()


async def test_reading_the_first_feed_page_resets_the_count(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        await post(http, fan.author, "news")
        await pipeline.settle()
        assert (await fan.live.next_update())["newPostCount"] == 1
        await helpers.feed_ids(http, fan.token, first=10)
        assert (await fan.live.next_update())["newPostCount"] == 0
        await fan.live.close()


async def test_a_long_absence_is_caught_up_from_the_timeline(
    server: ApiServer, pipeline, state
) -> None:
    """Offline users get no count writes during fan-out; subscribing rebuilds the count."""
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        await fan.live.close()
        # Long gone: no hub has held a socket of the fan within the grace period.
        namespace = state.settings.realtime_namespace
        online = Channels.for_redis(state.redis, namespace).online_key
        await state.redis.zadd(online, {str(fan.id): 1})
        for i in range(4):
            await post(http, fan.author, f"while long away {i}")
        await pipeline.settle()
        assert await state.redis.zcard(count_key(fan.id)) == 0  # (0 for a missing key too)
        live = await LiveClient.open(server, fan.token)
        assert (await live.next_update())["newPostCount"] == 4
        await live.close()
