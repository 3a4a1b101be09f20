"""The fan-out's insert on a real 3-node cluster: one call per node (decision 0089).

Each master gets one script call per page over every timeline it serves (keys of many slots,
`allow-cross-slot-keys`), the live counts riding in it; slots moving under the calls (a
migration half done: ASK; finished: MOVED to a client that mapped the cluster before) lose
no timeline and no count.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.posts.ids import created_ms
from app.realtime import batch_counts, counts
from app.realtime.keys import count_key
from app.redis_client import Cluster
from app.timelines.store import TimelineStore, timeline_key
from tests.helpers import post_id_at
from tests.timelines.local_cluster import local_cluster, redis_server_binary

pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="no redis-server binary")

BASE_MS = 1_790_000_000_000
USERS = list(range(1, 301))


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with local_cluster() as url:
        client = Cluster.from_url(url)
        try:
            await client.initialize()
            yield client
        finally:
            await client.aclose()


async def _evalsha_calls(node: Redis) -> int:
    stats = await node.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def _masters(cluster: Cluster) -> list[Redis]:
    return [Redis(host=n.host, port=int(n.port)) for n in cluster.get_primaries()]


async def _holding(store: TimelineStore, post_id: int) -> list[int]:
    found = await store.latest_many(USERS, 10)
    return [u for u, rows in found.items() if any(p == post_id for p, _ in rows)]


async def test_one_call_per_node_for_a_page_of_many_slots(cluster: Cluster) -> None:
    store = TimelineStore(cluster, 5, 3)
    for u in USERS[:200]:
        await store.rebuild(u, [])
    masters = _masters(cluster)
    try:
        before = [await _evalsha_calls(m) for m in masters]
        post = post_id_at(BASE_MS)
        assert await store.push_to_timelines(post, created_ms(post), USERS) == 200
        after = [await _evalsha_calls(m) for m in masters]
        # One call per master (a NOSCRIPT reload would show as a second one).
        assert [a - b for a, b in zip(after, before, strict=True)] in ([1, 1, 1], [2, 2, 2])
        assert await store.push_to_timelines(post, created_ms(post), USERS) == 0  # replay
        assert sorted(await _holding(store, post)) == USERS[:200]
    finally:
        for m in masters:
            await m.aclose()


async def _node_of(cluster: Cluster, key: str) -> tuple[Redis, str]:
    node = cluster.get_node_from_key(key)
    client = Redis(host=node.host, port=int(node.port))
    return client, (await client.execute_command("CLUSTER", "MYID")).decode()


async def _other(cluster: Cluster, than: str) -> tuple[Redis, str, int]:
    for node in cluster.get_primaries():
        client = Redis(host=node.host, port=int(node.port))
        found = (await client.execute_command("CLUSTER", "MYID")).decode()
        if found != than:
            return client, found, int(node.port)
        await client.aclose()
    raise AssertionError("one master only")


async def test_a_slot_moving_under_the_calls_loses_no_timeline_and_no_count(
    cluster: Cluster,
) -> None:
    """A slot half migrated (some of its timelines already on the new master: the old one
    answers "non local key" for them, then redis-py follows the ASK), then the migration
    finished behind the client's back (its map is stale: the old master no longer serves
    the slot at all). Every existing timeline gets each post, every online follower its
    count, or is handed back to be counted."""
    store = TimelineStore(cluster, 5, 3)
    settings = Settings()
    for u in USERS:
        await store.rebuild(u, [])
    slot = cluster.keyslot(timeline_key(USERS[0]))
    moving = [u for u in USERS if cluster.keyslot(timeline_key(u)) == slot]
    src, src_id = await _node_of(cluster, timeline_key(USERS[0]))
    dst, dst_id, dst_port = await _other(cluster, src_id)
    masters = _masters(cluster)
    try:
        await dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        await src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        await src.execute_command(
            "MIGRATE", "127.0.0.1", dst_port, "", 0, 5000, "KEYS", *map(timeline_key, moving)
        )
        post = post_id_at(BASE_MS + 1)
        assert await store.push_to_timelines(post, created_ms(post), USERS) == len(USERS)
        assert sorted(await _holding(store, post)) == USERS

        for m in masters:  # the migration finishes; the client still maps the slot to src
            await m.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        post = post_id_at(BASE_MS + 2)
        assert await store.push_to_timelines(post, created_ms(post), USERS) == len(USERS)
        assert sorted(await _holding(store, post)) == USERS

        # The fused page with counts, the slot moving back behind the client's back.
        online = [USERS[0], USERS[10], USERS[20], USERS[30]]
        await counts.mark_online(cluster, online, settings)
        await cluster.nodes_manager.initialize()
        await src.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", dst_id)
        await dst.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", src_id)
        src_port = int(src.connection_pool.connection_kwargs["port"])
        await dst.execute_command(
            "MIGRATE", "127.0.0.1", src_port, "", 0, 5000, "KEYS", *map(timeline_key, moving)
        )
        for m in masters:
            await m.execute_command("CLUSTER", "SETSLOT", slot, "NODE", src_id)
        post = post_id_at(BASE_MS + 3)
        guessed = online[1:3]  # USERS[0] and USERS[30] connected since the guess
        tail = batch_counts.count_tail(
            cluster, post, created_ms(post), USERS, guessed, settings,
            author_id=999, counting=True,
        )  # fmt: skip
        assert await store.push_with_tails(post, created_ms(post), USERS, [tail]) == len(USERS)
        published, missed = batch_counts.counted(tail, USERS)
        assert published == 2
        # USERS[0]'s timeline moved (written afterwards, handed back), USERS[30] not guessed.
        assert set(missed) >= {USERS[0], USERS[30]}
        assert set(missed).isdisjoint(guessed)
        assert sorted(await _holding(store, post)) == USERS
        for u in guessed:
            assert await cluster.zscore(count_key(u), str(post)) == created_ms(post)
    finally:
        for client in (src, dst, *masters):
            await client.aclose()


async def test_the_fused_page_counts_the_online_and_reports_the_unguessed(
    cluster: Cluster,
) -> None:
    """The counts ride in the per-node calls: guessed online users counted where their
    timelines live, the others online found by the online key's node, after every insert."""
    store = TimelineStore(cluster, 5, 3)
    settings = Settings()
    for u in USERS[:250]:
        await store.rebuild(u, [])
    online = USERS[::25]  # 12 users on every node
    await counts.mark_online(cluster, online, settings)
    post = post_id_at(BASE_MS + 5)
    guessed = online[:6]
    tail: Any = batch_counts.count_tail(
        cluster, post, created_ms(post), USERS, guessed, settings, author_id=999, counting=True
    )
    assert store.runs_tails_with(cluster)
    assert await store.push_with_tails(post, created_ms(post), USERS, [tail]) == 250
    published, missed = batch_counts.counted(tail, USERS)
    assert published == len(guessed)
    assert missed == online[6:]
    for u in guessed:
        assert await cluster.zscore(count_key(u), str(post)) == created_ms(post)
    for u in online[6:]:
        assert await cluster.exists(count_key(u)) == 0

    # Counting off (the post no longer reaches followers): nobody counted, all reported.
    later = post_id_at(BASE_MS + 6)
    tail = batch_counts.count_tail(
        cluster, later, created_ms(later), USERS, guessed, settings, author_id=999, counting=False
    )
    assert await store.push_with_tails(later, created_ms(later), USERS, [tail]) == 250
    assert batch_counts.counted(tail, USERS) == (0, online)
