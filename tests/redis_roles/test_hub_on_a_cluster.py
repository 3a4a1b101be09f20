"""The realtime hub with REDIS_PUBSUB_URL on a Redis Cluster (decision 0040): classic
PUBLISH reaches every node, so the hub listens on one; when that node goes away it listens on
another, its channels joined again, and a subscriber hears the next message."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.config import Settings
from app.realtime.hub import Hub
from app.redis_client import make_client
from tests.cluster_topology import cluster_url
from tests.conftest import TEST_DB
from tests.helpers import eventually
from tests.timelines.local_cluster import local_cluster, redis_server_binary

pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="no redis-server binary")


def _port(client: Redis | None) -> int:
    assert client is not None
    return int(client.connection_pool.connection_kwargs["port"])


async def _listeners(port: int, channel: str) -> int:
    node = Redis(port=port)
    try:
        reply = await node.execute_command("PUBSUB", "NUMSUB", channel)
        return int(reply[1])
    except (RedisError, OSError):
        return 0
    finally:
        await node.aclose()


async def test_the_hub_moves_to_another_node_when_its_node_goes(state: Any) -> None:
    async with local_cluster() as seed:
        settings = Settings(
            redis_url=state.settings.redis_url,
            redis_pubsub_url=cluster_url(seed),
            secret_key=state.settings.secret_key,
            realtime_namespace=TEST_DB,
            realtime_coalesce_ms=0,
        )
        pubsub = make_client(settings, settings.redis_pubsub_url)
        hub = Hub(pubsub, state.sessions, settings, state.timelines, leases_redis=state.redis)
        await hub.start()
        try:

            async def noop(code: int, reason: str) -> None:
                return None

            sub = await hub.subscribe(7, noop)
            channel = hub.channels.user(7)
            first = _port(hub._pubsub_redis)
            assert first == int(seed.split(":")[2].split("/")[0])  # the seed node at start
            await eventually(lambda: _listeners(first, channel), 10, 0.05, "joined")
            with contextlib.suppress(RedisError, OSError):
                await Redis(port=first).shutdown(nosave=True)

            async def moved() -> bool:
                now = _port(hub._pubsub_redis)
                return now != first and await _listeners(now, channel) == 1

            await eventually(moved, 30, 0.1, "the hub listens on another node")
            other = Redis(port=_port(hub._pubsub_redis))
            try:
                # Classic PUBLISH on any live node reaches the hub (the cluster itself is down:
                # its keys' slots on the stopped node are not served, pub/sub still is).
                await other.execute_command("PUBLISH", channel, "5:0:0")
            finally:
                await other.aclose()

            async def heard() -> bool:
                while True:
                    update = await sub.next()
                    if update.count == 5:
                        return True

            assert await eventually(heard, 10, 0.05, "the count reached the subscriber")
        finally:
            await hub.stop()
            await pubsub.aclose()
