"""Activity marks (app.users.activity.Activity) on the real Redis and Postgres: a read marks
the user active at most once an hour (a gate in the process, then one in Redis that every
process shares), and a user back after ACTIVE_DAYS away (whom fan-out skipped meanwhile) gets
a rebuilt timeline; log-in also rebuilds a lost one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from redis.asyncio import Redis

from app.timelines.store import timeline_key
from app.users import activity as activity_module
from app.users.activity import TOUCH_EVERY_SECONDS, Activity, _gate_key
from tests.helpers import MonotonicClock, follow, make_user, post, sql, timeline_ids


@dataclass
class Marks:
    """An Activity whose rebuilds are the fan-out service's, recorded."""

    state: object
    rebuilt: list[int] = field(default_factory=list)

    def activity(self, redis: Redis | None = None) -> Activity:
        state = self.state

        async def rebuild(user_id: int) -> int:
            self.rebuilt.append(user_id)
            return await state.fanout.rebuild_timeline(user_id)  # type: ignore[attr-defined]

        return Activity(
            redis or state.redis,  # type: ignore[attr-defined]
            state.engine,  # type: ignore[attr-defined]
            state.timelines,  # type: ignore[attr-defined]
            state.settings.active_days,  # type: ignore[attr-defined]
            rebuild,
        )


@pytest.fixture
def marks(state: object) -> Marks:
    return Marks(state)


async def _away(user_id: int, days: float) -> None:
    """Last active `days` ago."""
    await sql(
        "UPDATE users SET last_active_at = now() - $2::interval WHERE id = $1",
        user_id,
        timedelta(days),
    )


async def _marked_now(user_id: int) -> bool:
    [row] = await sql(
        "SELECT last_active_at > now() - interval '1 minute' AS fresh FROM users WHERE id = $1",
        user_id,
    )
    return bool(row["fresh"])


async def test_reads_mark_activity_at_most_once_an_hour(
    client, state, marks: Marks, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, user_id = await make_user(client, "reader")
    clock = MonotonicClock()
    monkeypatch.setattr(activity_module, "time", clock)  # the in-process gate's clock
    here, there = marks.activity(), marks.activity()  # two API processes, one Redis
    await _away(user_id, 2)
    await here.touch_read(user_id)
    assert await _marked_now(user_id)
    gate = _gate_key(user_id)
    assert 0 < await state.redis.ttl(gate) <= TOUCH_EVERY_SECONDS

    await _away(user_id, 2)
    await there.touch_read(user_id)  # another process: the Redis gate is closed
    assert not await _marked_now(user_id)
    await state.redis.delete(gate)  # (were Redis asked again now, it would let them in)
    await here.touch_read(user_id)  # within the hour of their marks: not even a Redis call
    await there.touch_read(user_id)
    assert not await _marked_now(user_id)

    clock.now += TOUCH_EVERY_SECONDS  # the hour is over
    await there.touch_read(user_id)
    assert await _marked_now(user_id)
    assert marks.rebuilt == []  # two days away is still active: nothing to rebuild


async def test_a_user_back_after_active_days_gets_a_rebuilt_timeline(
    client, state, pipeline, marks: Marks
) -> None:
    author, _ = await make_user(client, "author")
    reader, reader_id = await make_user(client, "reader")
    await follow(client, reader, "author")
    await pipeline.settle()
    await _away(reader_id, state.settings.active_days + 1)
    missed = [await post(client, author, f"while away {i}") for i in range(3)]
    await pipeline.settle()
    assert await timeline_ids(state, reader_id) == []  # fan-out skipped the inactive reader

    await marks.activity().touch_read(reader_id)  # their first feed page
    assert marks.rebuilt == [reader_id]
    assert await timeline_ids(state, reader_id) == list(reversed(missed))
    assert await _marked_now(reader_id)


async def test_a_user_never_marked_counts_as_returning(client, marks: Marks) -> None:
    _, user_id = await make_user(client, "quiet")
    await sql("UPDATE users SET last_active_at = NULL WHERE id = $1", user_id)
    await marks.activity().touch_read(user_id)
    assert marks.rebuilt == [user_id]
    assert await _marked_now(user_id)


async def test_log_in_rebuilds_a_lost_timeline_and_reads_leave_that_to_the_feed(
    client, state, marks: Marks
) -> None:
    _, user_id = await make_user(client, "reader")
    activity = marks.activity()
    await state.timelines.rebuild(user_id, [])
    await activity.touch(user_id, force=True)  # log-in: past the gate, timeline present
    assert marks.rebuilt == []

    await state.redis.delete(timeline_key(user_id))  # Redis lost it
    await state.redis.delete(_gate_key(user_id))
    activity.recently.clear()
    await activity.touch_read(user_id)  # a read: the feed serves from Postgres and rebuilds
    assert marks.rebuilt == []
    await activity.touch(user_id, force=True)  # log-in, within the hour: still marked
    assert marks.rebuilt == [user_id]
    assert await state.timelines.exists(user_id)


@pytest.fixture
async def dead_redis() -> AsyncIterator[Redis]:
    redis = Redis.from_url("redis://127.0.0.1:1/0")  # nothing listens there
    yield redis
    await redis.aclose()


async def test_without_redis_a_read_skips_the_mark(client, marks: Marks, dead_redis) -> None:
    """The gate is Redis: when it is down the feed still answers and marks later."""
    _, user_id = await make_user(client, "reader")
    await _away(user_id, 2)
    await marks.activity(dead_redis).touch_read(user_id)
    assert not await _marked_now(user_id)
    assert marks.rebuilt == []
