"""The count store and the hub's queues against the real Redis (no server, no sockets)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import pytest

from app.config import Settings
from app.fanout.constants import WITHDRAW_PAGE
from app.realtime import counts
from app.realtime.constants import CLOSE_GOING_AWAY, CLOSE_TOO_SLOW
from app.realtime.counts import (
    FeedCount,
    add_and_publish,
    add_for_users,
    forget_posts,
    reset_new_post_count,
    resume_counting,
    stop_counting,
)
from app.realtime.hub import Hub
from app.realtime.keys import Channels
from app.realtime.subscriber import Subscriber
from tests.conftest import TEST_DB
from tests.helpers import eventually, sql
from tests.timelines.local_cluster import local_cluster, redis_server_binary

SETTINGS = Settings(realtime_namespace=TEST_DB)


async def _listen(state, user_id: int):
    pubsub = state.redis.pubsub()
    await pubsub.subscribe(Channels(TEST_DB).user(user_id))
    await pubsub.get_message(timeout=1)  # the subscribe confirmation
    return pubsub


async def _messages(pubsub) -> list[FeedCount]:
    out = []
    while (message := await pubsub.get_message(timeout=0.2)) is not None:
        out.append(counts.decode_count(message["data"]))
    return out


def _shown(messages: list[FeedCount]) -> list[tuple[int, int | None]]:
    return [(m.count, m.latest_ms) for m in messages]


def _authors(owner: Mapping[int, int]):
    async def authors_of(post_ids: list[int]) -> Mapping[int, int]:
        return {p: owner[p] for p in post_ids if p in owner}

    return authors_of


async def test_offline_users_cost_the_fan_out_nothing(state) -> None:
    pubsub = await _listen(state, 5)
    assert await add_and_publish(state.redis, [5, 6], [(1001, 5_000)], SETTINGS) == 0
    assert await _messages(pubsub) == []
    assert await add_for_users(state.redis, [5], [], SETTINGS) == {5: FeedCount(0, None)}
    await counts.mark_online(state.redis, [5], SETTINGS)
    assert await add_and_publish(state.redis, [5, 6], [(1002, 6_000)], SETTINGS) == 1
    assert [m.count for m in await _messages(pubsub)] == [1]
    await pubsub.aclose()


async def test_counts_are_idempotent_and_announced_once(state) -> None:
    await counts.mark_online(state.redis, [7, 8], SETTINGS)
    pubsub = await _listen(state, 7)
    entries = [(1001, 5_000), (1002, 6_000)]
    assert await add_and_publish(state.redis, [7, 8], entries, SETTINGS) == 2
    # A replayed fan-out batch changes nothing and announces nothing.
    assert await add_and_publish(state.redis, [7, 8], entries, SETTINGS) == 0
    [message] = await _messages(pubsub)
    assert (message.count, message.latest_ms) == (2, 6_000)
    assert message.published_ms > 0
    now = await add_for_users(state.redis, [7, 9], [], SETTINGS)
    assert now == {7: FeedCount(2, 6_000), 9: FeedCount(0, None)}
    await pubsub.aclose()


async def test_the_count_saturates_at_its_bound(state) -> None:
    small = Settings(realtime_namespace=TEST_DB, realtime_count_max=5)
    await counts.mark_online(state.redis, [3], small)
    for i in range(8):
        await add_and_publish(state.redis, [3], [(2000 + i, 10_000 + i)], small)
    assert (await add_for_users(state.redis, [3], [], small))[3] == FeedCount(5, 10_007)


async def test_reset_forgets_what_was_seen_and_tells_every_socket(state) -> None:
    await counts.mark_online(state.redis, [4], SETTINGS)
    await add_and_publish(state.redis, [4], [(1, 1_000), (2, 2_000), (3, 3_000)], SETTINGS)
    pubsub = await _listen(state, 4)
    await reset_new_post_count(state.redis, SETTINGS, 4, seen_upto_ms=2_000)
    assert (await add_for_users(state.redis, [4], [], SETTINGS))[4] == FeedCount(1, 3_000)
    await reset_new_post_count(state.redis, SETTINGS, 4)
    assert (await add_for_users(state.redis, [4], [], SETTINGS))[4] == FeedCount(0, None)
    assert [m.count for m in await _messages(pubsub)] == [1, 0]
    await reset_new_post_count(state.redis, SETTINGS, 4)  # nothing left: nothing announced
    assert await _messages(pubsub) == []
    await pubsub.aclose()


async def test_a_burst_becomes_one_frame_per_interval() -> None:
    async def never(code: int, reason: str) -> None:
        raise AssertionError("not dropped")

    sub = Subscriber(1, never, interval=0.2)
    for i in range(1, 51):
        sub.offer(FeedCount(i, i))
    before_first = time.monotonic()  # the subscriber's clock; the interval runs from the frame
    assert (await sub.next()).count == 50  # one frame for the whole burst
    sub.offer(FeedCount(51, 51))
    sub.offer(FeedCount(52, 52))
    assert (await sub.next()).count == 52
    # Waited for the interval, counted from the first frame: a loaded machine only adds.
    assert time.monotonic() - before_first >= 0.19


async def test_a_stalled_subscriber_is_dropped_and_the_others_still_served(state) -> None:
    hub = Hub(
        state.redis,
        state.sessions,
        Settings(realtime_namespace=TEST_DB, realtime_coalesce_ms=0, realtime_stall_seconds=0.3),
        state.timelines,
    )
    closed: dict[int, int] = {}

    def closer(user_id: int):
        async def close(code: int, reason: str) -> None:
            closed[user_id] = code

        return close

    await hub.start()
    stuck = await hub.subscribe(1, closer(1))
    fine = await hub.subscribe(2, closer(2))
    assert (await fine.next()).count == 0  # `stuck` never takes its first update
    for post_id in range(1, 4):
        await add_and_publish(state.redis, [1, 2], [(post_id, 1_000 * post_id)], SETTINGS)
        assert (await asyncio.wait_for(fine.next(), 1)).count == post_id
    await eventually(lambda: stuck.dropped and closed == {1: CLOSE_TOO_SLOW}, within=5)
    assert hub.subscriber_count == 1
    await hub.stop()
    assert closed == {1: CLOSE_TOO_SLOW, 2: CLOSE_GOING_AWAY}
    assert hub.subscriber_count == 0


async def test_stopping_a_pair_removes_its_posts_and_keeps_them_out(state) -> None:
    """Unfollow/block: the author's counted posts go at once, the rest is announced with
    the newest remaining post's time, and that author's later batches count nothing."""
    await counts.mark_online(state.redis, [7, 8], SETTINGS)
    pubsub = await _listen(state, 7)
    owner = {1001: 1, 1002: 2, 1003: 2, 1004: 2}
    await add_and_publish(state.redis, [7, 8], [(1001, 5_000)], SETTINGS, author_id=1)
    await add_and_publish(
        state.redis, [7, 8], [(1002, 6_000), (1003, 7_000)], SETTINGS, author_id=2
    )
    assert _shown(await _messages(pubsub)) == [(1, 5_000), (3, 7_000)]

    assert await stop_counting(state.redis, [(7, 2)], _authors(owner), SETTINGS) == 2
    assert _shown(await _messages(pubsub)) == [(1, 5_000)]
    # A batch queued before the unfollow (queue lag), the same post replayed, a catch-up
    # that knows the author: none of them counts or announces anything.
    assert await add_and_publish(state.redis, [7], [(1004, 6_500)], SETTINGS, author_id=2) == 0
    assert await add_and_publish(state.redis, [7], [(1003, 7_000)], SETTINGS, author_id=2) == 0
    now = await add_for_users(state.redis, [7], [(1004, 6_500, 2)], SETTINGS)
    assert now == {7: FeedCount(1, 5_000)}
    assert await stop_counting(state.redis, [(7, 2)], _authors(owner), SETTINGS) == 0
    assert await _messages(pubsub) == []
    # Only the pair is cut: the author's other followers still count the author.
    assert (await add_for_users(state.redis, [8], [], SETTINGS))[8] == FeedCount(3, 7_000)

    assert await stop_counting(state.redis, [(7, 1)], _authors(owner), SETTINGS) == 1
    assert _shown(await _messages(pubsub)) == [(0, None)]
    assert await state.redis.ttl(counts.stops_key(7)) > 0
    await pubsub.aclose()


async def test_a_refollow_counts_only_posts_made_after_it(state) -> None:
    t = counts.now_ms() - 60_000  # follow marks older than the counts' ttl are pruned
    await counts.mark_online(state.redis, [7], SETTINGS)
    pubsub = await _listen(state, 7)
    await add_and_publish(state.redis, [7], [(1001, t + 5_000)], SETTINGS, author_id=2)
    await stop_counting(state.redis, [(7, 2)], _authors({1001: 2}), SETTINGS)
    await resume_counting(state.redis, 7, 2, t + 9_000, SETTINGS)
    assert _shown(await _messages(pubsub)) == [(1, t + 5_000), (0, None)]
    # Old posts (the one counted before, one whose batch lagged) stay out; new ones count.
    old = [(1001, t + 5_000), (1002, t + 8_000)]
    assert await add_and_publish(state.redis, [7], old, SETTINGS, author_id=2) == 0
    both = [(1002, t + 8_000), (1003, t + 9_500)]
    assert await add_and_publish(state.redis, [7], both, SETTINGS, author_id=2) == 1
    assert _shown(await _messages(pubsub)) == [(1, t + 9_500)]
    await pubsub.aclose()
    # A first follow has no mark to lower and writes none.
    await resume_counting(state.redis, 9, 2, t, SETTINGS)
    assert not await state.redis.exists(counts.stops_key(9))


async def test_stopping_a_pair_of_a_saturated_count(state) -> None:
    """The count keeps the newest `count_max` posts: removing a pair leaves the others still
    kept (those trimmed away before do not come back), and the bound holds afterwards."""
    small = Settings(realtime_namespace=TEST_DB, realtime_count_max=5)
    await counts.mark_online(state.redis, [3], small)
    owner = {2000 + i: 1 + i % 2 for i in range(8)}  # authors 1, 2, 1, 2, ...
    for post_id, author in owner.items():
        await add_and_publish(state.redis, [3], [(post_id, post_id * 10)], small, author_id=author)
    assert (await add_for_users(state.redis, [3], [], small))[3] == FeedCount(5, 20_070)
    # Kept: 2003..2007; author 2 wrote 2003, 2005 and 2007.
    assert await stop_counting(state.redis, [(3, 2)], _authors(owner), small) == 3
    assert (await add_for_users(state.redis, [3], [], small))[3] == FeedCount(2, 20_060)
    for i in range(7):
        await add_and_publish(state.redis, [3], [(3000 + i, 30_000 + i)], small, author_id=1)
    assert (await add_for_users(state.redis, [3], [], small))[3] == FeedCount(5, 30_006)


async def test_forgetting_a_deleted_post_lowers_once_and_keeps_it_out(state) -> None:
    """A delete leaves the counts that hold the post (the newest remaining post's time is
    announced), lowers nothing twice, and a raise that was already under way (a fan-out batch
    or a pull-mode delivery past its SQL check) does not count the post again."""
    await counts.mark_online(state.redis, [7, 8], SETTINGS)
    pubsub = await _listen(state, 7)
    await add_and_publish(state.redis, [7, 8], [(1001, 5_000), (1002, 6_000)], SETTINGS)
    await add_and_publish(state.redis, [8], [(1003, 7_000)], SETTINGS)
    assert _shown(await _messages(pubsub)) == [(2, 6_000)]

    # User 9 never counted it (offline): nothing to lower, no tombstone written.
    assert await forget_posts(state.redis, [7, 8, 9], [1002], SETTINGS, final=True) == 2
    assert _shown(await _messages(pubsub)) == [(1, 5_000)]
    assert await forget_posts(state.redis, [7, 8, 9], [1002], SETTINGS, final=True) == 0
    assert await _messages(pubsub) == []
    assert not await state.redis.exists(counts.stops_key(9))

    assert await add_and_publish(state.redis, [7], [(1002, 6_000)], SETTINGS, author_id=1) == 0
    late = await add_for_users(state.redis, [7, 8], [(1002, 6_000)], SETTINGS, author_id=1)
    assert late == {7: FeedCount(1, 5_000), 8: FeedCount(2, 7_000)}
    assert await _messages(pubsub) == []
    # Other posts still count.
    assert await add_and_publish(state.redis, [7], [(1004, 8_000)], SETTINGS, author_id=1) == 1
    assert _shown(await _messages(pubsub)) == [(2, 8_000)]
    await pubsub.aclose()


async def test_forgetting_a_post_made_private_lets_it_count_again(state) -> None:
    """A narrowing leaves no tombstone: made visible to followers again, the post counts."""
    await counts.mark_online(state.redis, [7], SETTINGS)
    await add_and_publish(state.redis, [7], [(1001, 5_000)], SETTINGS)
    assert await forget_posts(state.redis, [7], [1001], SETTINGS, final=False) == 1
    assert (await add_for_users(state.redis, [7], [], SETTINGS))[7] == FeedCount(0, None)
    assert await add_and_publish(state.redis, [7], [(1001, 5_000)], SETTINGS, author_id=1) == 1


async def test_a_withdrawal_reaches_followers_on_every_page(state) -> None:
    """The post-change job pages through all followers (WITHDRAW_PAGE a query): a follower
    on the first page and one on the last both lose the post."""
    count = WITHDRAW_PAGE + 1
    await sql(
        "INSERT INTO users (handle, password_hash, display_name)"
        " SELECT 'w' || g, '!', 'w' FROM generate_series(0, $1) g",
        count,
    )
    await sql("INSERT INTO follows (follower_id, followee_id) SELECT id, 1 FROM users WHERE id > 1")
    first, last = 2, count + 1
    await counts.mark_online(state.redis, [first, last], SETTINGS)
    await add_and_publish(state.redis, [first, last], [(1001, 5_000)], SETTINGS)
    assert await state.fanout.withdraw_from_counts(1, 1001, final=True) == count
    now = await add_for_users(state.redis, [first, last], [], SETTINGS)
    assert now == {first: FeedCount(0, None), last: FeedCount(0, None)}


@pytest.mark.skipif(redis_server_binary() is None, reason="no redis-server to build a cluster")
async def test_stopping_a_pair_on_a_cluster() -> None:
    """A user's count and stop marks share a slot: the scripts run on Redis Cluster too
    (a real 3-node cluster on loopback), one user per call."""
    from redis.asyncio.cluster import RedisCluster

    async with local_cluster() as url:
        cluster = RedisCluster.from_url(url)
        try:
            users = list(range(1, 41))
            await counts.mark_online(cluster, users, SETTINGS)
            t = counts.now_ms() - 60_000
            await add_and_publish(cluster, users, [(1001, t)], SETTINGS, author_id=1)
            await add_and_publish(cluster, users, [(1002, t + 1)], SETTINGS, author_id=2)
            pairs = [(u, 2) for u in users[:20]]
            owner = _authors({1001: 1, 1002: 2})
            assert await stop_counting(cluster, pairs, owner, SETTINGS) == 20
            assert (
                await add_and_publish(cluster, users, [(1003, t + 2)], SETTINGS, author_id=2) == 20
            )
            await resume_counting(cluster, 1, 2, t + 3, SETTINGS)
            assert (
                await add_and_publish(cluster, [1, 2], [(1004, t + 4)], SETTINGS, author_id=2) == 1
            )
            now = await add_for_users(cluster, [1, 21], [], SETTINGS)
            assert now == {1: FeedCount(2, t + 4), 21: FeedCount(3, t + 2)}
            # A delete: one user per call as well, tombstones in each user's own slot. Only
            # users 21..40 counted 1003 (the others stopped counting author 2 before it).
            assert await forget_posts(cluster, users, [1003], SETTINGS, final=True) == 20
            assert await add_and_publish(cluster, users, [(1003, t + 2)], SETTINGS) == 0
            now = await add_for_users(cluster, [1, 21], [], SETTINGS)
            assert now == {1: FeedCount(2, t + 4), 21: FeedCount(2, t + 1)}
        finally:
            await cluster.aclose()
