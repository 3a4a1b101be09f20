"""Several posts in one fan-out pass (`TimelineStore.push_posts_to_timelines`, PUSH_POSTS,
decision 0059) against a real Redis: the same timelines, counts and bounds as pushing the
posts one by one with `push_to_timelines`, whatever state each timeline is in (missing,
known-empty, short, full with hidden entries, holding some of the posts or newer ones, a
retired zset), and its one-append path taken when every post is newer.
"""

from __future__ import annotations

import random

import pytest
from redis.asyncio import Redis

from app.timelines import TimelineStore, created_at_ms, timeline_key
from app.timelines.packed import entries_of, pack_ids
from app.timelines.scripts import FORMAT_BYTE
from tests.helpers import post_id_at as pid

BASE_MS = 1_790_000_000_000
MAX, SLACK = 6, 3
# Twin users: user u gets the batch, u + TWIN the same posts one by one.
TWIN = 10_000


def entry(post: int) -> tuple[int, int]:
    return (post, created_at_ms(post))


async def _state(
    redis: Redis, store: TimelineStore, user: int, kind: str, posts: list[int]
) -> None:
    """Put one timeline in a state (the same for both twins)."""
    if kind == "missing":
        return
    if kind == "zset":
        await redis.zadd(timeline_key(user), {b"1": 1.0})
        return
    if kind == "empty":
        await store.rebuild(user, [])
        return
    # A packed string written as appends leave it: up to SLACK hidden entries in front.
    body = pack_ids(posts)
    await redis.set(timeline_key(user), FORMAT_BYTE + body)


def _valid(raw: bytes) -> bool:
    body = entries_of(raw)
    ids = [int.from_bytes(body[i : i + 8], "big") for i in range(0, len(body), 8)]
    return raw[:1] == FORMAT_BYTE and ids == sorted(set(ids)) and len(ids) <= MAX + SLACK


async def test_a_burst_matches_pushing_the_posts_one_by_one(redis: Redis) -> None:
    """Random timelines and random runs of posts (older, newer, replayed, more than the
    bound): the visible timelines, missing keys and the added counts equal the one-by-one
    pushes; every string stays ascending, unique and within `max + slack`."""
    store = TimelineStore(redis, timeline_max=MAX, author_posts_max=3, trim_slack=SLACK)
    rng = random.Random(59)
    kinds = ["missing", "zset", "empty", "short", "full", "hidden"]
    for case in range(60):
        await redis.flushdb()
        users = list(range(1, 13))
        for user in users:
            kind = rng.choice(kinds)
            n = {
                "short": rng.randint(1, MAX - 1),
                "full": MAX,
                "hidden": MAX + rng.randint(1, SLACK),
            }
            start = rng.randint(0, 40)
            posts = [pid(BASE_MS + 10 * (start + i), user) for i in range(n.get(kind, 0))]
            await _state(redis, store, user, kind, posts)
            await _state(redis, store, user + TWIN, kind, posts)
        at = rng.randint(0, 60)
        burst = sorted(
            {
                pid(BASE_MS + 10 * (at + i) + rng.choice([0, 0, 3]), rng.choice([1, 2]))
                for i in range(rng.randint(2, 2 * MAX + 2))
            }
        )
        # Some timelines already hold some of the posts (a replayed job).
        for user in rng.sample(users, 3):
            for post in rng.sample(burst, min(2, len(burst))):
                await store.push_to_timelines(post, created_at_ms(post), [user, user + TWIN])
        added = await store.push_posts_to_timelines([entry(p) for p in burst], users)
        one_by_one = 0
        for post in burst:
            one_by_one += await store.push_to_timelines(
                post, created_at_ms(post), [u + TWIN for u in users]
            )
        assert added == one_by_one, case
        for user in users:
            mine = await store.latest_or_none(user, MAX)
            twin = await store.latest_or_none(user + TWIN, MAX)
            assert mine == twin, (case, user)
            raw = await redis.get(timeline_key(user))
            if raw is not None:
                assert _valid(raw), (case, user)


# INFO commandstats counts every client's commands: other workers' appends would count
@pytest.mark.alone
async def test_posts_all_newer_take_one_append(redis: Redis) -> None:
    """Every post newer than the timeline's newest entry: one APPEND of them all per key (and
    the trim when the string passes its bound), not one per post."""
    store = TimelineStore(redis, timeline_max=MAX, author_posts_max=3, trim_slack=SLACK)
    old = [pid(BASE_MS + i) for i in range(MAX)]
    for user in (1, 2):
        await store.rebuild(user, [entry(p) for p in old])
    burst = [pid(BASE_MS + 100 + i) for i in range(2)]
    before = await redis.info("commandstats")
    assert await store.push_posts_to_timelines([entry(p) for p in burst], [1, 2]) == 4
    after = await redis.info("commandstats")
    appends = after["cmdstat_append"]["calls"] - before.get("cmdstat_append", {"calls": 0})["calls"]
    assert appends == 2
    assert (
        "cmdstat_setrange" not in after
        or after["cmdstat_setrange"]["calls"]
        == before.get("cmdstat_setrange", {"calls": 0})["calls"]
    )
    assert [p for p, _ in await store.latest(1, MAX)] == sorted([*old, *burst], reverse=True)[:MAX]
    # Replayed: nothing more.
    assert await store.push_posts_to_timelines([entry(p) for p in burst], [1, 2]) == 0


async def test_a_burst_longer_than_the_bound_keeps_the_newest(redis: Redis) -> None:
    store = TimelineStore(redis, timeline_max=MAX, author_posts_max=3, trim_slack=SLACK)
    await store.rebuild(1, [])
    burst = [pid(BASE_MS + i) for i in range(3 * MAX)]
    assert await store.push_posts_to_timelines([entry(p) for p in burst], [1, 2]) == 3 * MAX
    assert [p for p, _ in await store.latest(1, 50)] == sorted(burst, reverse=True)[:MAX]
    raw = await redis.get(timeline_key(1))
    assert raw is not None and _valid(raw)
    assert await store.latest_or_none(2, 5) is None  # missing stays missing


async def test_scores_are_checked(redis: Redis) -> None:
    store = TimelineStore(redis, timeline_max=MAX, author_posts_max=3)
    post = pid(BASE_MS)
    with pytest.raises(ValueError):
        await store.push_posts_to_timelines([(post, BASE_MS + 1), entry(pid(BASE_MS + 5))], [1])
