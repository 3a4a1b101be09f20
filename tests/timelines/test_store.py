"""TimelineStore against a real Redis: bounds, idempotence, missing keys, keyset paging.

Runs on its own Redis db (15 by default) on the server REDIS_URL names, because the suite's
conftest owns REDIS_URL's db for the app; TIMELINE_TEST_REDIS_URL overrides it outright.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from redis.asyncio import Redis

from app.timelines import (
    POST_ID_EPOCH_MS,
    TimelineStore,
    author_posts_key,
    created_at_ms,
    encode_post_id,
    timeline_key,
)
from app.timelines.scripts import EMPTY_MEMBER
from tests.timelines.local_cluster import local_cluster, redis_server_binary


def _test_redis_url() -> str:
    explicit = os.environ.get("TIMELINE_TEST_REDIS_URL")
    if explicit:
        return explicit
    parts = urlsplit(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/15")
    return urlunsplit((parts.scheme, parts.netloc, "/15", parts.query, parts.fragment))


BASE_MS = 1_790_000_000_000


def pid(ms: int, seq: int = 0) -> int:
    """A snowflake id created at `ms` (19 digits for any date after mid-2022)."""
    return ((ms - POST_ID_EPOCH_MS) << 22) | seq


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(_test_redis_url())
    await client.flushdb()
    try:
        yield client
    finally:
        await client.flushdb()
        await client.aclose()


@pytest.fixture
async def store(redis: Redis) -> TimelineStore:
    return TimelineStore(redis, timeline_max=5, author_posts_max=3)


def test_key_layout_and_member_encoding() -> None:
    assert timeline_key(42) == "tl:{42}"
    assert author_posts_key(7) == "posts:{7}"
    post = pid(BASE_MS, 3)
    assert len(str(post)) == 19
    assert encode_post_id(post) == str(post)
    assert encode_post_id(12) == "0000000000000000012"
    assert created_at_ms(post) == BASE_MS
    with pytest.raises(ValueError):
        encode_post_id(0)


async def test_score_must_be_the_ids_own_millisecond(store: TimelineStore) -> None:
    """Reads derive scores from ids (no WITHSCORES), so a disagreeing score is refused."""
    await store.rebuild(1, [])
    with pytest.raises(ValueError, match="creation ms"):
        await store.push_to_timelines(pid(BASE_MS), BASE_MS + 1, [1])
    with pytest.raises(ValueError):
        await store.rebuild(1, [(pid(BASE_MS), BASE_MS - 1)])
    assert await store.latest_or_none(1, 5) == []


async def test_push_trims_to_timeline_max_keeping_newest(
    redis: Redis, store: TimelineStore
) -> None:
    await store.rebuild(1, [])
    posts = [pid(BASE_MS + i) for i in range(8)]
    for p in posts:
        assert await store.push_to_timelines(p, created_at_ms(p), [1]) == 1
    assert await redis.zcard(timeline_key(1)) == 5  # marker gone, bound kept
    assert await store.latest(1, 10) == [(p, created_at_ms(p)) for p in reversed(posts[3:])]


async def test_push_is_idempotent_and_does_not_resurrect_trimmed_posts(
    redis: Redis, store: TimelineStore
) -> None:
    posts = [pid(BASE_MS + i) for i in range(6)]
    await store.rebuild(1, [(p, created_at_ms(p)) for p in posts])
    before = await redis.zrange(timeline_key(1), 0, -1, withscores=True)

    newest = posts[-1]
    assert await store.push_to_timelines(newest, created_at_ms(newest), [1]) == 0
    # posts[0] was trimmed by the rebuild (6 > 5); replaying it leaves the timeline unchanged.
    await store.push_to_timelines(posts[0], created_at_ms(posts[0]), [1])
    assert await redis.zrange(timeline_key(1), 0, -1, withscores=True) == before
    assert [p for p, _ in await store.latest(1, 10)] == list(reversed(posts[1:]))


async def test_only_existing_skips_missing_timelines(store: TimelineStore) -> None:
    await store.rebuild(1, [])
    await store.rebuild(3, [(pid(BASE_MS - 5), BASE_MS - 5)])
    post = pid(BASE_MS)
    assert await store.push_to_timelines(post, BASE_MS, [1, 2, 3]) == 2
    assert not await store.exists(2)
    assert await store.latest_or_none(2, 5) is None
    assert [p for p, _ in await store.latest(1, 5)] == [post]

    assert await store.push_to_timelines(post, BASE_MS, [1, 2, 3], only_existing=False) == 1
    assert await store.latest(2, 5) == [(post, BASE_MS)]


async def test_push_many_batches_and_survives_script_flush(redis: Redis) -> None:
    store = TimelineStore(redis, timeline_max=5, author_posts_max=3, script_batch=100)
    users = list(range(1, 351))
    post = pid(BASE_MS)
    assert await store.push_to_timelines(post, BASE_MS, users, only_existing=False) == 350
    await redis.script_flush()
    second = pid(BASE_MS + 1)
    assert await store.push_to_timelines(second, BASE_MS + 1, users) == 350
    assert await store.latest(350, 5) == [(second, BASE_MS + 1), (post, BASE_MS)]


async def test_keyset_paging_across_a_long_run_of_equal_scores(redis: Redis) -> None:
    store = TimelineStore(redis, timeline_max=100, author_posts_max=3)
    # 3 newer posts, a run of 23 posts in one millisecond (> page size), 4 older posts.
    entries = [(pid(BASE_MS + 10 + i), BASE_MS + 10 + i) for i in range(3)]
    entries += [(pid(BASE_MS, seq), BASE_MS) for seq in range(23)]
    entries += [(pid(BASE_MS - 10 - i), BASE_MS - 10 - i) for i in range(4)]
    await store.rebuild(1, entries)
    expected = sorted(entries, key=lambda e: (e[1], e[0]), reverse=True)

    for page_size in (1, 4, 7, 30):
        seen = await store.latest(1, page_size)
        while True:
            last_id, last_score = seen[-1]
            page = await store.before(1, last_score, last_id, page_size)
            assert len(page) <= page_size
            if not page:
                break
            seen.extend(page)
        assert seen == expected, page_size

    # A cursor whose post has since been removed still pages correctly.
    run = [e for e in expected if e[1] == BASE_MS]
    cursor = run[5]
    await store.remove_posts(1, [cursor[0]])
    assert await store.before(1, cursor[1], cursor[0], 3) == run[6:9]
    # A cursor older than everything returns nothing.
    assert await store.before(1, BASE_MS - 100, pid(BASE_MS - 100), 5) == []


async def test_rebuild_with_no_entries_marks_known_empty(
    redis: Redis, store: TimelineStore
) -> None:
    assert await store.rebuild(1, []) == 0
    assert await store.exists(1)
    assert await store.latest(1, 20) == []
    assert await store.latest_or_none(1, 20) == []
    assert await store.count(1) == 0
    assert await store.before(1, BASE_MS, pid(BASE_MS), 20) == []
    assert await redis.zrange(timeline_key(1), 0, -1, withscores=True) == [
        (EMPTY_MEMBER.encode(), 0.0)
    ]

    post = pid(BASE_MS)
    assert await store.push_to_timelines(post, BASE_MS, [1]) == 1
    assert await redis.zrange(timeline_key(1), 0, -1) == [str(post).encode()]

    # Removing the last post keeps the timeline known-empty instead of deleting it.
    assert await store.remove_posts(1, [post]) == 1
    assert await store.exists(1)
    assert await store.latest_or_none(1, 20) == []
    # Removing from a missing timeline does not create it.
    assert await store.remove_posts(2, [post]) == 0
    assert not await store.exists(2)


async def test_rebuild_replaces_atomically_and_keeps_racing_fanout(store: TimelineStore) -> None:
    old = [(pid(BASE_MS - i), BASE_MS - i) for i in range(1, 4)]
    await store.rebuild(1, old)
    racing = (pid(BASE_MS + 50), BASE_MS + 50)
    await store.push_to_timelines(racing[0], racing[1], [1])

    fresh = [(pid(BASE_MS + i), BASE_MS + i) for i in range(10)]
    assert await store.rebuild(1, fresh, keep_since_ms=BASE_MS + 40) == 5
    assert await store.latest(1, 10) == [racing, *reversed(fresh[-4:])]

    assert await store.rebuild(1, old) == 3
    assert await store.latest(1, 10) == old


async def test_push_entries_backfill(store: TimelineStore) -> None:
    entries = [(pid(BASE_MS + i), BASE_MS + i) for i in range(7)]
    assert await store.push_entries(1, entries) == -1
    assert not await store.exists(1)

    await store.rebuild(1, [])
    assert await store.push_entries(1, entries[:2]) == 2
    assert await store.push_entries(1, entries) == 5
    assert await store.latest(1, 10) == list(reversed(entries[2:]))
    # Replay: the two posts older than the full timeline are re-added and trimmed at once.
    assert await store.push_entries(1, entries) == 2
    assert await store.latest(1, 10) == list(reversed(entries[2:]))

    assert await store.push_entries(2, entries[:1], create=True) == 1
    assert await store.latest(2, 10) == entries[:1]


async def test_remove_posts_from_many(store: TimelineStore) -> None:
    a, b, c = (pid(BASE_MS + i) for i in range(3))
    for user in (1, 2):
        await store.rebuild(user, [(a, BASE_MS), (b, BASE_MS + 1), (c, BASE_MS + 2)])
    assert await store.remove_posts_from_many([a, c], [1, 2, 3]) == 4
    assert await store.latest(1, 5) == [(b, BASE_MS + 1)]
    assert await store.latest(2, 5) == [(b, BASE_MS + 1)]
    assert not await store.exists(3)


async def test_author_index(redis: Redis, store: TimelineStore) -> None:
    posts = [pid(BASE_MS + i) for i in range(5)]
    for p in posts:
        await store.push_author_post(9, p, created_at_ms(p))
    await store.push_author_post(9, posts[-1], created_at_ms(posts[-1]))  # replay
    assert await redis.zcard(author_posts_key(9)) == 3
    assert await store.author_latest(9, 2) == [(p, created_at_ms(p)) for p in posts[:2:-1]][:2]

    await store.push_author_post(10, posts[0], created_at_ms(posts[0]))
    await store.rebuild_author(11, [])
    many = await store.author_latest_many([9, 10, 11, 12], 10)
    assert many == {
        9: [(p, created_at_ms(p)) for p in reversed(posts[2:])],
        10: [(posts[0], created_at_ms(posts[0]))],
        11: [],
        12: [],
    }
    or_none = await store.author_latest_many_or_none([11, 12], 10)
    assert or_none == {11: [], 12: None}

    assert await store.remove_author_post(10, posts[0]) == 1
    assert await store.author_exists(10)
    assert await store.author_latest(10, 5) == []


CLUSTER_URL = os.environ.get("TIMELINE_TEST_REDIS_CLUSTER_URL")


@pytest.mark.skipif(
    not CLUSTER_URL and redis_server_binary() is None, reason="no redis-server to build a cluster"
)
async def test_cluster_groups_keys_by_slot() -> None:
    """On Redis Cluster a multi-key script must stay in one slot: the store groups by slot.
    Runs on a real 3-node cluster started on loopback (or TIMELINE_TEST_REDIS_CLUSTER_URL)."""
    if CLUSTER_URL:
        await _cluster_checks(CLUSTER_URL)
        return
    async with local_cluster() as url:
        await _cluster_checks(url)


async def _cluster_checks(url: str) -> None:
    from redis.asyncio.cluster import RedisCluster

    cluster = RedisCluster.from_url(url)
    try:
        await cluster.flushdb(target_nodes=RedisCluster.PRIMARIES)
        await cluster.script_flush()  # routed to every primary: exercises NOSCRIPT
        store = TimelineStore(cluster, timeline_max=5, author_posts_max=3)
        users = list(range(1, 301))
        for u in users[:200]:
            await store.rebuild(u, [])
        posts = [pid(BASE_MS + i) for i in range(7)]
        for p in posts:
            assert await store.push_to_timelines(p, created_at_ms(p), users) == 200
        assert await store.latest(150, 10) == [(p, created_at_ms(p)) for p in reversed(posts[2:])]
        assert await store.latest_or_none(250, 10) is None
        last = posts[4]
        assert await store.before(1, created_at_ms(last), last, 2) == [
            (p, created_at_ms(p)) for p in (posts[3], posts[2])
        ]
        assert await store.remove_posts_from_many(posts[5:], users) == 400
        assert [p for p, _ in await store.latest(17, 10)] == list(reversed(posts[2:5]))

        for a in (1, 2, 3):
            await store.push_author_post(a, posts[a], created_at_ms(posts[a]))
        many = await store.author_latest_many_or_none([1, 2, 3, 4], 5)
        assert many == {
            **{a: [(posts[a], created_at_ms(posts[a]))] for a in (1, 2, 3)},
            4: None,
        }
    finally:
        await cluster.flushdb(target_nodes=RedisCluster.PRIMARIES)
        await cluster.aclose()
