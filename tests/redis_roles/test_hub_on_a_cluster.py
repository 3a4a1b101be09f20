"""The realtime hub with REDIS_PUBSUB_URL on a Redis Cluster (decision 0090): sharded pub/sub,
a connection per shard holding one of the hub's channels. A user's channel lives on its
slot's master; when that master is killed (its replica promoted) or the slot migrates to
another master, the hub subscribes the channel where the slot is now, and a subscriber hears
the next count published there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import RedisError

from app.config import Settings
from app.realtime.hub import Hub
from app.realtime.pubsub import ShardedListener
from app.redis_client import make_client
from tests.cluster_topology import ClusterTopology
from tests.conftest import TEST_DB
from tests.helpers import eventually
from tests.timelines.local_cluster import redis_server_binary

pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="no redis-server binary")

USER = 7


async def _shard_listeners(client: Redis, channel: str) -> int:
    try:
        reply = await client.execute_command("PUBSUB", "SHARDNUMSUB", channel)
        return int(reply[1])
    except (RedisError, OSError):
        return 0


async def _port_of(hub: Hub, channel: str) -> int | None:
    listener = hub.listener
    assert isinstance(listener, ShardedListener)
    client = listener.shard_of(channel)
    return None if client is None else int(client.connection_pool.connection_kwargs["port"])


@asynccontextmanager
async def _hub(state: Any, cluster: ClusterTopology) -> AsyncIterator[tuple[Hub, RedisCluster]]:
    settings = Settings(
        redis_url=state.settings.redis_url,
        redis_pubsub_url=cluster.url,
        secret_key=state.settings.secret_key,
        realtime_namespace=TEST_DB,
        realtime_coalesce_ms=0,
    )
    pubsub = make_client(settings, settings.redis_pubsub_url)
    assert isinstance(pubsub, RedisCluster)
    hub = Hub(pubsub, state.sessions, settings, state.timelines, leases_redis=state.redis)
    await hub.start()
    try:
        yield hub, pubsub
    finally:
        await hub.stop()
        await pubsub.aclose()


async def _hears(sub: Any, count: int) -> bool:
    while True:
        update = await sub.next()
        if update.count == count:
            return True


async def _noop(code: int, reason: str) -> None:
    return None


async def _publish(pubsub: RedisCluster, channel: str, count: int) -> int:
    """SPUBLISH through the cluster client (routed by the channel's slot, as the count
    scripts' shard); the number of subscribers that received it."""
    return int(await pubsub.execute_command("SPUBLISH", channel, f"{count}:0:0"))


async def test_the_hub_follows_a_channel_whose_master_is_killed(state: Any) -> None:
    async with ClusterTopology(masters=3) as cluster, _hub(state, cluster) as (hub, pubsub):
        sub = await hub.subscribe(USER, _noop)
        channel = hub.channels.user(USER)
        assert channel.endswith(f"{{{USER}}}")  # in the user's count keys' slot
        victim = cluster.master_for(channel)
        assert await _port_of(hub, channel) == victim.port
        assert await _shard_listeners(victim.client, channel) == 1
        assert await _publish(pubsub, channel, 3) == 1
        assert await eventually(lambda: _hears(sub, 3), 10, 0.05, "before the kill")

        cluster.kill(victim)
        await cluster.await_failover(victim, 30, 8.0)
        promoted = cluster.replica_of(victim)

        async def rehomed() -> bool:
            return await _shard_listeners(promoted.client, channel) == 1

        await eventually(rehomed, 30, 0.1, "the channel subscribed on the promoted master")
        assert await _port_of(hub, channel) == promoted.port

        async def published() -> bool:
            try:
                return await _publish(pubsub, channel, 5) == 1
            except RedisError:
                return False  # the client still maps the slot to the dead node

        await eventually(published, 30, 0.1, "SPUBLISH reaches the hub on the promoted master")
        assert await eventually(lambda: _hears(sub, 5), 10, 0.05, "the count after the kill")


async def test_the_hub_follows_a_channel_whose_slot_migrates(state: Any) -> None:
    async with ClusterTopology(masters=3) as cluster, _hub(state, cluster) as (hub, pubsub):
        sub = await hub.subscribe(USER, _noop)
        channel = hub.channels.user(USER)
        source = cluster.master_for(channel)
        target = next(m for m in cluster.masters if m is not source)
        slot = key_slot(channel.encode())
        assert await _shard_listeners(source.client, channel) == 1

        # The slot moves as redis-cli --cluster reshard does: importing on the target,
        # migrating on the source, its keys (the user's count) MIGRATEd, then the target's.
        await target.client.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source.id)
        await source.client.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target.id)
        held = await source.client.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
        if held:
            await source.client.execute_command(
                "MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *held
            )
        for node in (target, source, *[m for m in cluster.masters if m not in (source, target)]):
            await node.client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target.id)

        async def moved() -> bool:
            return await _shard_listeners(target.client, channel) == 1

        await eventually(moved, 20, 0.1, "the channel subscribed on the slot's new master")
        assert await _shard_listeners(source.client, channel) == 0
        assert await _port_of(hub, channel) == target.port

        async def published() -> bool:
            try:
                return await _publish(pubsub, channel, 9) == 1
            except RedisError:
                return False

        await eventually(published, 20, 0.1, "SPUBLISH reaches the hub on the new master")
        assert await eventually(lambda: _hears(sub, 9), 10, 0.05, "the count after the move")
