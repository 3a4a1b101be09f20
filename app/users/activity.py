"""Activity tracking: who counts as an active follower (gets pushed timelines).

A user active within ACTIVE_DAYS receives fan-out; one who was away longer received none,
so their timeline is stale even if its key survived: it is rebuilt when they come back.
Reads mark activity at most once an hour (a Redis gate) to keep the write off the hot path.

Timeline rebuilds run here, in the API process that noticed the need, not as a worker job:
the returning user's next read wants the rebuilt timeline, a job would queue it behind
fan-out batches (seconds to minutes under lag, during which the feed answers degraded from
Postgres), and a rebuild is one bounded query plus one script call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.redis_scripts import AnyRedis
from app.timelines.store import TimelineStore

TOUCH_EVERY_SECONDS = 3600

_TOUCH = text(
    """
    WITH old AS (SELECT id, last_active_at FROM users WHERE id = :user FOR UPDATE)
    UPDATE users SET last_active_at = now() FROM old WHERE users.id = old.id
    RETURNING old.last_active_at
    """
)


def _gate_key(user_id: int) -> str:
    """`act:{<user_id>}`: set while the user's activity was marked within the hour."""
    return f"act:{{{int(user_id)}}}"


class Activity:
    """Marks users active; rebuilds the timeline of one coming back (`rebuild`: the fan-out
    service's, handed over by the composition root)."""

    def __init__(
        self,
        redis: AnyRedis,
        engine: AsyncEngine,
        timelines: TimelineStore,
        active_days: int,
        rebuild: Callable[[int], Awaitable[int]],
    ) -> None:
        self.redis = redis
        self.engine = engine
        self.timelines = timelines
        self.active_days = active_days
        self.rebuild = rebuild

    async def touch(self, user_id: int, *, force: bool = False) -> None:
        """Record activity; rebuild the timeline of a user coming back from inactivity."""
        try:
            if not force and not await self.redis.set(
                _gate_key(user_id), b"1", nx=True, ex=TOUCH_EVERY_SECONDS
            ):
                return
        except RedisError:
            return  # Redis down: the feed still answers; activity is marked on a later read
        async with self.engine.begin() as conn:
            previous = (await conn.execute(_TOUCH, {"user": user_id})).scalar_one_or_none()
        cutoff = datetime.now(UTC) - timedelta(days=self.active_days)
        stale = previous is None or previous < cutoff
        # At log-in (force) a missing timeline is rebuilt too; on reads the feed answers from
        # Postgres meanwhile and schedules that rebuild itself.
        if stale or (force and not await self.timelines.exists(user_id)):
            await self.rebuild(user_id)
