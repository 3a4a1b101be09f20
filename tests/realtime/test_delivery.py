"""Delivery under pressure and at shutdown, against dedicated uvicorn processes."""

from __future__ import annotations

import asyncio
import signal
import socket
import time

import pytest
from websockets.exceptions import ConnectionClosed

from app.realtime.counts import now_ms
from app.realtime.keys import Channels
from tests.conftest import TEST_DB
from tests.helpers import eventually, make_user
from tests.realtime.live import LiveClient
from tests.servers import ApiServer


async def test_a_client_that_never_reads_is_dropped_without_slowing_others(state) -> None:
    # No coalescing window, so every notification becomes a frame and the socket fills fast.
    env = {"REALTIME_COALESCE_MS": "0", "REALTIME_STALL_SECONDS": "1"}
    async with ApiServer(env=env) as api:
        async with api.http() as http:
            slow_token, slow_id = await make_user(http, "slow")
            fast_token, fast_id = await make_user(http, "fast")
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a tiny TCP window
        raw.connect(("127.0.0.1", api.port))
        slow = await LiveClient.open(api, slow_token, sock=raw, max_queue=1, compression=None)
        fast = await LiveClient.open(api, fast_token)
        await slow.next_update()
        await fast.next_update()
        assert await api.metric("feed_realtime_subscribers") == 2

        channels = Channels(TEST_DB)
        sent = 0

        async def dropped_after_a_round() -> bool:
            nonlocal sent
            for _ in range(500):  # the slow client reads none of these
                sent += 1
                await state.redis.publish(channels.user(slow_id), f"{sent}:0:{now_ms()}")
            # Meanwhile the other socket on the same process is served at once.
            published = time.monotonic()
            await state.redis.publish(channels.user(fast_id), f"{sent}:0:{now_ms()}")
            assert (await fast.next_update(seconds=1.0))["newPostCount"] == sent
            assert time.monotonic() - published < 0.5
            dropped = 'reason="slow"'
            return await api.metric("feed_realtime_subscribers_dropped_total", dropped) >= 1

        await eventually(
            dropped_after_a_round, within=20, interval=0, what="the slow client dropped"
        )

        assert await api.metric("feed_realtime_subscribers") == 1
        # The dropped socket is cut: once its reader resumes, buffered frames, then the end.
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(10):
                while True:
                    await slow.ws.recv()
        await fast.close()


async def test_server_shutdown_closes_sockets_with_a_code(state) -> None:
    async with ApiServer() as api:
        async with api.http() as http:
            token, _ = await make_user(http, "leaving")
        live = await LiveClient.open(api, token)
        await live.next_update()
        stopped = time.monotonic()
        assert api.proc is not None
        api.proc.send_signal(signal.SIGTERM)
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(5):
                await live.ws.recv()
        assert live.ws.close_code == 1012  # service restart: the client reconnects
        # Uvicorn re-raises the signal once its shutdown (lifespan included) completed.
        assert await asyncio.to_thread(api.proc.wait, 10) in (0, -signal.SIGTERM)
        assert time.monotonic() - stopped < 5
