"""The count store and the hub's queues against the real Redis (no server, no sockets)."""

from __future__ import annotations

import asyncio

from app.realtime import counts
from app.realtime.counts import FeedCount, add_and_publish, add_for_users, reset_new_post_count
from app.realtime.hub import CLOSE_GOING_AWAY, CLOSE_TOO_SLOW, Hub, Subscriber
from app.realtime.keys import Channels
from app.realtime.settings import RealtimeSettings
from tests.conftest import TEST_DB

SETTINGS = RealtimeSettings(namespace=TEST_DB)


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
    small = RealtimeSettings(namespace=TEST_DB, count_max=5)
    await counts.mark_online(state.redis, [3], small)
    for i in range(8):
        await add_and_publish(state.redis, [3], [(2000 + i, 10_000 + i)], small)
    assert (await add_for_users(state.redis, [3], [], small))[3] == FeedCount(5, 10_007)


async def test_reset_forgets_what_was_seen_and_tells_every_socket(state) -> None:
    await counts.mark_online(state.redis, [4], SETTINGS)
    await add_and_publish(state.redis, [4], [(1, 1_000), (2, 2_000), (3, 3_000)], SETTINGS)
    pubsub = await _listen(state, 4)
    await reset_new_post_count(state.redis, 4, seen_upto_ms=2_000)
    assert (await add_for_users(state.redis, [4], [], SETTINGS))[4] == FeedCount(1, 3_000)
    await reset_new_post_count(state.redis, 4)
    assert (await add_for_users(state.redis, [4], [], SETTINGS))[4] == FeedCount(0, None)
    assert [m.count for m in await _messages(pubsub)] == [1, 0]
    await reset_new_post_count(state.redis, 4)  # nothing left: nothing announced
    assert await _messages(pubsub) == []
    await pubsub.aclose()


async def test_a_burst_becomes_one_frame_per_interval() -> None:
    async def never(code: int, reason: str) -> None:
        raise AssertionError("not dropped")

    sub = Subscriber(1, never, interval=0.2)
    for i in range(1, 51):
        sub.offer(FeedCount(i, i))
    assert (await sub.next()).count == 50  # one frame for the whole burst
    sub.offer(FeedCount(51, 51))
    sub.offer(FeedCount(52, 52))
    started = asyncio.get_running_loop().time()
    assert (await sub.next()).count == 52
    assert asyncio.get_running_loop().time() - started >= 0.15  # waited for the interval


async def test_a_stalled_subscriber_is_dropped_and_the_others_still_served(state) -> None:
    hub = Hub(
        state.redis,
        state.sessions,
        RealtimeSettings(namespace=TEST_DB, coalesce_ms=0, stall_seconds=0.3),
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
        await asyncio.sleep(0.2)
        assert (await asyncio.wait_for(fine.next(), 1)).count > 0
    await asyncio.sleep(0.5)
    assert stuck.dropped and closed == {1: CLOSE_TOO_SLOW}
    assert hub.subscriber_count == 1
    await hub.stop()
    assert closed == {1: CLOSE_TOO_SLOW, 2: CLOSE_GOING_AWAY}
    assert hub.subscriber_count == 0
