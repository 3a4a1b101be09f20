"""TimelineStore against a real Redis: bounds, idempotence, missing keys, keyset paging, a
random mix of operations checked against a model, and keys of another type (zsets of the
retired layout, decision 0034) taken for missing by reads and deleted by writes.

Small bounds of its own (5 per timeline), on the session's Redis db, which tests/conftest.py
empties before every test.
"""

from __future__ import annotations

import os
import random

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from app.timelines import (
    TimelineStore,
    author_posts_key,
    created_at_ms,
    encode_post_id,
    timeline_key,
)
from app.timelines.convert import convert_zsets
from app.timelines.packed import default_trim_slack, entries_of, pack_ids
from app.timelines.scripts import FORMAT_BYTE
from app.timelines.store import NotReplicated, durability_mark_key, timeline_keys
from tests.helpers import post_id_at as pid
from tests.timelines.local_cluster import local_cluster, redis_server_binary

BASE_MS = 1_790_000_000_000


@pytest.fixture
async def store(redis: Redis) -> TimelineStore:
    return TimelineStore(redis, timeline_max=5, author_posts_max=3)


def make(redis: Redis, **kw: int) -> TimelineStore:
    kw.setdefault("timeline_max", 5)
    kw.setdefault("author_posts_max", 3)
    return TimelineStore(redis, **kw)


def entry(post: int) -> tuple[int, int]:
    return (post, created_at_ms(post))


def test_key_layout_and_member_encoding() -> None:
    assert timeline_key(42) == "tl:{42}"
    assert timeline_keys([42, 7]) == [b"tl:{42}", b"tl:{7}"]  # the fan-out's bytes keys
    assert author_posts_key(7) == "posts:{7}"
    post = pid(BASE_MS, 3)
    assert len(str(post)) == 19
    assert encode_post_id(post) == str(post)
    assert encode_post_id(12) == "0000000000000000012"
    assert created_at_ms(post) == BASE_MS
    with pytest.raises(ValueError):
        encode_post_id(0)
    # packed: 8-byte big-endian ids, ascending, duplicates dropped
    assert pack_ids([3, 1, 3]) == b"\0" * 7 + b"\x01" + b"\0" * 7 + b"\x03"
    assert entries_of(FORMAT_BYTE + pack_ids([post])) == pack_ids([post])
    with pytest.raises(ValueError):
        entries_of(b"\x02" + pack_ids([post]))


def test_default_trim_slack_fits_the_allocation() -> None:
    # 800 entries: 6,401 bytes + sds header = 6,407 in a 7,168-byte jemalloc class: 95 fit.
    assert default_trim_slack(800) == 64
    assert default_trim_slack(200) == 23  # 1,607 bytes in a 1,792-byte class
    assert default_trim_slack(5) == 1


async def test_score_must_be_the_ids_own_millisecond(store: TimelineStore) -> None:
    """Reads derive scores from ids (no WITHSCORES), so a disagreeing score is refused."""
    await store.rebuild(1, [])
    with pytest.raises(ValueError, match="creation ms"):
        await store.push_to_timelines(pid(BASE_MS), BASE_MS + 1, [1])
    with pytest.raises(ValueError):
        await store.rebuild(1, [(pid(BASE_MS), BASE_MS - 1)])
    assert await store.latest_or_none(1, 5) == []


@pytest.mark.parametrize("slack", [None, 3])
async def test_push_trims_to_timeline_max_keeping_newest(redis: Redis, slack: int | None) -> None:
    store = TimelineStore(redis, 5, 3, trim_slack=slack)
    await store.rebuild(1, [])
    posts = [pid(BASE_MS + i) for i in range(12)]
    for p in posts:
        assert await store.push_to_timelines(p, created_at_ms(p), [1]) == 1
        assert await store.count(1) == min(5, posts.index(p) + 1)  # marker gone, bound kept
    assert await store.latest(1, 10) == [entry(p) for p in reversed(posts[-5:])]
    raw = await store.inspect(timeline_key(1), 5)
    assert raw.layout == "packed"
    assert 5 + raw.hidden <= 5 + store.timeline_slack  # at most `slack` past the bound


async def test_push_is_idempotent_and_does_not_resurrect_trimmed_posts(
    redis: Redis, store: TimelineStore
) -> None:
    posts = [pid(BASE_MS + i) for i in range(6)]
    await store.rebuild(1, [entry(p) for p in posts])
    before = await redis.dump(timeline_key(1))

    newest = posts[-1]
    assert await store.push_to_timelines(newest, created_at_ms(newest), [1]) == 0
    # posts[0] was trimmed by the rebuild (6 > 5); replaying it leaves the timeline unchanged.
    await store.push_to_timelines(posts[0], created_at_ms(posts[0]), [1])
    assert await redis.dump(timeline_key(1)) == before
    assert [p for p, _ in await store.latest(1, 10)] == list(reversed(posts[1:]))


async def test_replayed_batch_changes_nothing_visible_with_hidden_entries(redis: Redis) -> None:
    """A full timeline past its bound keeps older entries in front (until the trim); replays
    of any of its posts, visible or hidden, change nothing a reader sees."""
    store = make(redis, trim_slack=4)
    posts = [pid(BASE_MS + i) for i in range(8)]
    await store.rebuild(1, [])
    for p in posts:
        await store.push_to_timelines(p, created_at_ms(p), [1])
    raw = await store.inspect(timeline_key(1), 5)
    assert raw.hidden == 3  # 8 entries, 5 visible
    visible = await store.latest(1, 10)
    assert visible == [entry(p) for p in reversed(posts[3:])]
    for p in posts:  # replay everything, in order and out of order
        await store.push_to_timelines(p, created_at_ms(p), [1])
    for p in reversed(posts):
        await store.push_to_timelines(p, created_at_ms(p), [1])
    assert await store.latest(1, 10) == visible
    assert await store.count(1) == 5
    # Hidden entries never come back: not through paging, not after a removal.
    assert await store.before(1, BASE_MS + 3, posts[3], 10) == []
    await store.remove_posts(1, [posts[7]])
    assert await store.latest(1, 10) == [entry(p) for p in reversed(posts[3:7])]


async def test_out_of_order_inserts_keep_id_order(redis: Redis) -> None:
    """Fan-out batches of different posts arrive in any order (lag, retries, backfills)."""
    store = make(redis, timeline_max=100, trim_slack=8)
    rng = random.Random(7)
    posts = [pid(BASE_MS + rng.randrange(40), seq) for seq in range(150)]
    await store.rebuild(1, [])
    for p in posts:
        await store.push_to_timelines(p, created_at_ms(p), [1])
    expected = [entry(p) for p in sorted(set(posts), reverse=True)[:100]]
    assert await store.latest(1, 100) == expected


@pytest.mark.parametrize("size", [3, 8, 12])
async def test_a_late_post_lands_in_place_at_every_depth(redis: Redis, size: int) -> None:
    """The fan-out probes the newest 8 entries; a late post goes among them (or, older, into
    the whole string, or into a short string read whole), and a replay of any entry adds
    nothing."""
    store = make(redis, timeline_max=20)
    entries = [entry(pid(BASE_MS + 10 * i)) for i in range(size)]
    for depth in range(size + 1):
        await store.rebuild(1, entries)
        late = pid(BASE_MS + 10 * (size - depth) - 5)  # `depth` entries are newer
        assert await store.push_to_timelines(late, created_at_ms(late), [1]) == 1
        expected = sorted([*entries, entry(late)], reverse=True)
        assert await store.latest(1, 50) == expected, depth
        for post, _ in expected:
            assert await store.push_to_timelines(post, created_at_ms(post), [1]) == 0
        assert await store.latest(1, 50) == expected, depth


async def test_late_inserts_keep_the_packed_bytes_and_the_bound(redis: Redis) -> None:
    """Interleaved posts (late ones one to a few slots back, among hidden entries, across the
    amortized trim): the string is always the format byte then ascending unique ids, never
    longer than `max + slack` entries, and its newest `max` are the newest posts."""
    store = make(redis, timeline_max=12, trim_slack=3)
    rng = random.Random(24)
    await store.rebuild(1, [])
    seen: set[int] = set()
    for step in range(200):
        post = pid(BASE_MS + step - rng.choice([0, 0, 1, 2, 3, 5, 9, 30]), step)
        await store.push_to_timelines(post, created_at_ms(post), [1])
        seen.add(post)
        raw = await redis.get(timeline_keys([1])[0])
        assert raw is not None and raw[:1] == FORMAT_BYTE
        assert len(raw) <= 1 + 8 * (12 + 3), step
        body = entries_of(raw)
        assert body == pack_ids(ids_of(body)), step  # ascending, unique
        assert body[-8 * 12 :] == pack_ids(sorted(seen)[-12:]), step


def ids_of(body: bytes) -> list[int]:
    return [int.from_bytes(body[i : i + 8], "big") for i in range(0, len(body), 8)]


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


# SCRIPT FLUSH empties every client's script cache: other workers' pipelines would miss
@pytest.mark.alone
async def test_push_many_batches_and_survives_script_flush(redis: Redis) -> None:
    store = make(redis, script_batch=100)
    users = list(range(1, 351))
    post = pid(BASE_MS)
    assert await store.push_to_timelines(post, BASE_MS, users, only_existing=False) == 350
    await redis.script_flush()
    second = pid(BASE_MS + 1)
    assert await store.push_to_timelines(second, BASE_MS + 1, users) == 350
    assert await store.latest(350, 5) == [(second, BASE_MS + 1), (post, BASE_MS)]


async def test_keyset_paging_across_a_long_run_of_equal_scores(redis: Redis) -> None:
    store = make(redis, timeline_max=100)
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
    # A cursor whose id lies outside its score's millisecond is clamped into it.
    assert await store.before(1, BASE_MS, pid(BASE_MS + 5), 2) == run[:2]
    assert await store.before(1, BASE_MS, pid(BASE_MS - 5), 2) == expected[26:28]


async def test_rebuild_with_no_entries_marks_known_empty(
    redis: Redis, store: TimelineStore
) -> None:
    assert await store.rebuild(1, []) == 0
    assert await store.exists(1)
    assert await store.latest(1, 20) == []
    assert await store.latest_or_none(1, 20) == []
    assert await store.latest_many([1, 2], 20) == {1: [], 2: []}
    assert await store.count(1) == 0
    assert await store.before(1, BASE_MS, pid(BASE_MS), 20) == []
    assert await redis.get(timeline_key(1)) == FORMAT_BYTE

    post = pid(BASE_MS)
    assert await store.push_to_timelines(post, BASE_MS, [1]) == 1
    assert await store.latest(1, 20) == [(post, BASE_MS)]
    assert await store.count(1) == 1
    assert await redis.get(timeline_key(1)) == FORMAT_BYTE + pack_ids([post])

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
    # The racing entry is kept once even when the snapshot has it too.
    assert await store.rebuild(1, [racing, *fresh[:2]], keep_since_ms=BASE_MS + 40) == 3

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
    assert len(await store.author_latest(9, 100)) == 3
    assert (await store.inspect(author_posts_key(9), 3)).layout == "packed"
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


# -- a random mix of operations against a model ------------------------------------------


class Model:
    """What a bounded timeline means, in plain Python: the newest `max` ids of a set, or
    None (missing). The store's replies must match it (the old zset layout's semantics)."""

    def __init__(self, max_entries: int) -> None:
        self.max = max_entries
        self.timelines: dict[int, set[int] | None] = {}

    def _trim(self, user: int, ids: set[int]) -> None:
        self.timelines[user] = set(sorted(ids)[-self.max :])

    def push(self, post: int, users: list[int], only_existing: bool) -> int:
        added = 0
        for u in users:
            ids = self.timelines.get(u)
            if ids is None:
                if not only_existing:
                    self.timelines[u] = {post}
                    added += 1
            elif post not in ids:
                self._trim(u, ids | {post})
                added += 1
        return added

    def push_entries(self, user: int, posts: list[int]) -> int:
        ids = self.timelines.get(user)
        if ids is None:
            return -1
        self._trim(user, ids | set(posts))
        return len(set(posts) - ids)

    def remove(self, posts: list[int], users: list[int]) -> int:
        removed = 0
        for u in users:
            ids = self.timelines.get(u)
            if ids is not None:
                removed += len(ids & set(posts))
                self.timelines[u] = ids - set(posts)
        return removed

    def rebuild(self, user: int, posts: list[int], keep_since_ms: int) -> int:
        kept = {p for p in self.timelines.get(user) or () if created_at_ms(p) >= keep_since_ms}
        self._trim(user, set(posts) | kept)
        return len(self.timelines[user] or ())

    def latest(self, user: int, limit: int) -> list[tuple[int, int]]:
        return [entry(p) for p in sorted(self.timelines.get(user) or (), reverse=True)][:limit]


async def test_random_operations_match_a_model(redis: Redis) -> None:
    """Out-of-order and replayed pushes, backfills, removals and racing rebuilds in a random
    mix, on timelines with hidden entries (a small trim slack): every reply and every read
    (latest, count, keyset pages) is what the model says."""
    rng = random.Random(12)
    store = make(redis, timeline_max=20, trim_slack=6)
    model = Model(20)
    users = [1, 2, 3]
    for u in users[:2]:
        await store.rebuild(u, [])
        model.timelines[u] = set()
    clock = BASE_MS
    pool: list[int] = []
    for step in range(400):
        op = rng.random()
        if op < 0.55 or not pool:
            clock += rng.choice((0, 1, 1, 2))
            post = pid(clock, rng.randrange(3)) if rng.random() < 0.8 else rng.choice(pool)
            if rng.random() < 0.2 and pool:
                post = pid(created_at_ms(rng.choice(pool)), rng.randrange(3, 6))  # late arrival
            pool.append(post)
            only = rng.random() < 0.9
            got = await store.push_to_timelines(
                post, created_at_ms(post), users, only_existing=only
            )
            want: object = model.push(post, users, only)
        elif op < 0.7:
            picks = [rng.choice(pool) for _ in range(rng.randrange(1, 6))]
            got = await store.push_entries(users[0], [entry(p) for p in picks])
            want = model.push_entries(users[0], picks)
        elif op < 0.85:
            doomed = [rng.choice(pool) for _ in range(rng.randrange(1, 4))]
            got = await store.remove_posts_from_many(doomed, users)
            want = model.remove(doomed, users)
        else:
            snap = [rng.choice(pool) for _ in range(rng.randrange(0, 30))]
            keep = created_at_ms(rng.choice(pool))
            got = await store.rebuild(users[1], [entry(p) for p in snap], keep_since_ms=keep)
            want = model.rebuild(users[1], snap, keep)
        assert got == want, (step, op)
        for u in users:
            rows = await store.latest(u, 50)
            assert rows == model.latest(u, 50), step
            assert await store.count(u) == len(rows)
            n = rng.randrange(1, 25)
            assert await store.latest_or_none(u, n) == (
                None if model.timelines.get(u) is None else model.latest(u, n)
            )
            if rows:
                cut = rows[rng.randrange(len(rows))]
                older = [r for r in rows if r[0] < cut[0]]
                assert await store.before(u, cut[1], cut[0], 7) == older[:7], step


# -- keys of another type: zsets of the retired layout not yet converted -------------------


async def test_a_key_of_another_type_is_no_timeline(redis: Redis, store: TimelineStore) -> None:
    """Decision 0034: reads take a zset for missing (its owner's next read rebuilds it, which
    replaces it); any write that meets one deletes it, so a zset that missed a write is never
    converted later without it."""
    posts = [pid(BASE_MS + i) for i in range(4)]
    zset = {str(p): created_at_ms(p) for p in posts[:2]}
    for u in (1, 2, 3, 4, 5):
        await redis.zadd(timeline_key(u), zset)
    await redis.zadd(author_posts_key(9), zset)
    await redis.zadd(author_posts_key(8), zset)

    assert (await store.inspect(timeline_key(1), 5)).layout == "zset"
    assert not await store.exists(1)
    assert await store.count(1) == 0
    assert await store.latest(1, 5) == []
    assert await store.latest_or_none(1, 5) is None
    assert await store.latest_or_none(1, 0) is None
    assert await store.latest_many([1, 2], 5) == {1: [], 2: []}
    assert await store.before(1, BASE_MS + 9, pid(BASE_MS + 9), 5) == []
    assert not await store.author_exists(9)
    assert await store.author_latest_many_or_none([9, 7], 5) == {9: None, 7: None}
    assert await redis.type(timeline_key(1)) == b"zset"  # reads change nothing

    # Writes: the fan-out (existing timelines only) and removals delete it...
    assert await store.push_to_timelines(posts[2], created_at_ms(posts[2]), [1]) == 0
    assert await store.remove_posts_from_many([posts[0]], [2]) == 0
    assert await store.push_entries(3, [entry(posts[2])]) == -1
    for u in (1, 2, 3):
        assert not await redis.exists(timeline_key(u))
    # ...a creating write, a rebuild and a creating backfill replace it.
    assert await store.push_author_post(9, posts[3], created_at_ms(posts[3])) == 1
    assert await store.author_latest(9, 5) == [entry(posts[3])]
    assert await store.rebuild(4, [entry(posts[1])], keep_since_ms=BASE_MS) == 1
    assert await store.latest(4, 5) == [entry(posts[1])]
    assert await store.push_entries(5, [entry(posts[3])], create=True) == 1
    assert await store.latest(5, 5) == [entry(posts[3])]
    assert await store.remove_author_post(8, posts[0]) == 0
    assert not await redis.exists(author_posts_key(8))


async def test_full_timeline_memory_per_entry(redis: Redis) -> None:
    """The point of the packed layout: a full 800-entry timeline in one small string."""
    store = make(redis, timeline_max=800)
    posts = [pid(BASE_MS + i) for i in range(800)]
    await store.rebuild(1, [entry(p) for p in posts])
    for i in range(100):  # appends, one amortized trim
        p = pid(BASE_MS + 1000 + i)
        await store.push_to_timelines(p, created_at_ms(p), [1])
    raw = await store.inspect(timeline_key(1), 800)
    assert len(raw.entries) == 800
    info = await redis.info("memory")
    if info.get("mem_allocator", "").startswith("jemalloc"):
        assert raw.memory_bytes is not None and raw.memory_bytes / 800 <= 10


CLUSTER_URL = os.environ.get("TIMELINE_TEST_REDIS_CLUSTER_URL")


@pytest.mark.skipif(
    not CLUSTER_URL and redis_server_binary() is None, reason="no redis-server to build a cluster"
)
async def test_cluster_groups_keys_by_slot() -> None:
    """On Redis Cluster a multi-key script must stay in one slot: the store groups by slot.
    Runs on a real 3-node cluster started on loopback (or TIMELINE_TEST_REDIS_CLUSTER_URL),
    with zsets of the retired layout converted slot by slot."""
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
        store = TimelineStore(cluster, 5, 3)
        users = list(range(1, 301))
        for u in users[:200]:
            await store.rebuild(u, [])
        posts = [pid(BASE_MS + i) for i in range(7)]
        for p in posts:
            assert await store.push_to_timelines(p, created_at_ms(p), users) == 200
        assert await store.latest(150, 10) == [entry(p) for p in reversed(posts[2:])]
        assert await store.latest_or_none(250, 10) is None
        last = posts[4]
        assert await store.before(1, created_at_ms(last), last, 2) == [
            entry(p) for p in (posts[3], posts[2])
        ]
        assert await store.remove_posts_from_many(posts[5:], users) == 400
        assert [p for p, _ in await store.latest(17, 10)] == list(reversed(posts[2:5]))

        for a in (1, 2, 3):
            await store.push_author_post(a, posts[a], created_at_ms(posts[a]))
        many = await store.author_latest_many_or_none([1, 2, 3, 4], 5)
        assert many == {**{a: [entry(posts[a])] for a in (1, 2, 3)}, 4: None}

        # Zsets of the retired layout in every slot, converted from a SCAN of all primaries.
        for u in users[200:]:
            await cluster.zadd(timeline_key(u), {str(p): created_at_ms(p) for p in posts[:2]})
        keys = [k async for page in store.scan_keys("tl:{*}") for k in page]
        assert len(keys) == 300
        assert await store.latest_many([17, 250], 10) == {
            17: [entry(p) for p in reversed(posts[2:5])],
            250: [],
        }
        assert await convert_zsets(cluster, keys, 5) == 100
        assert await convert_zsets(cluster, keys, 5) == 0
        assert await store.latest_many([17, 250], 10) == {
            17: [entry(p) for p in reversed(posts[2:5])],
            250: [entry(posts[1]), entry(posts[0])],
        }

        # No replica anywhere: a WAIT for one fails on the first master it asks.
        await store.confirm_replicated(users, 0, 20)
        with pytest.raises(NotReplicated, match="0 of 1 replicas"):
            await store.confirm_replicated(users, 1, 20)
        marks = {durability_mark_key(key_slot(k)) for k in timeline_keys(users)}
        assert sum([await cluster.exists(m) for m in marks]) == 3  # one per master
    finally:
        await cluster.flushdb(target_nodes=RedisCluster.PRIMARIES)
        await cluster.aclose()


async def test_confirm_replicated_waits_for_replicas_after_a_mark_of_its_own(
    redis: Redis,
) -> None:
    """The test server has no replica: asking for none returns at once, asking for one fails
    after the timeout, naming what fell short. The mark written before the WAIT (so the WAIT
    covers every earlier write of that server, whichever connection made them) hashes to the
    slot it stands for, every slot having one."""
    store = TimelineStore(redis, 5, 3)
    await store.confirm_replicated([1, 2], 0, 10)
    await store.confirm_replicated([], 1, 10)
    with pytest.raises(NotReplicated, match=r"server: 0 of 1 replicas .* within 30 ms"):
        await store.confirm_replicated([1, 2], 1, 30)
    mark = durability_mark_key(key_slot(timeline_keys([1])[0]))
    assert await redis.get(mark) is not None
    await redis.delete(mark)
    for slot in (0, 1, 8191, 12539, 16383):
        assert key_slot(durability_mark_key(slot).encode()) == slot
