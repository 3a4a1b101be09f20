"""Activity tracking: who counts as an active follower (gets pushed timelines).

A user active within ACTIVE_DAYS receives fan-out; one who was away longer received none,
so their timeline is stale even if its key survived: it is rebuilt when they come back.
Reads mark activity at most once an hour, behind two gates: an in-process one (`recently`,
no I/O at all: a first feed page within the hour of this process's last mark costs nothing)
and the Redis one (`act:{user}`, SET NX, shared by every process). The SQL write runs once
an hour per user. Because a process trusts its own gate for an hour after it last saw the
mark, however old the Redis gate it found was, a user's `last_active_at` is at most ~2 h old
while they keep reading: nothing that ACTIVE_DAYS (30 days) can tell apart.

Timeline rebuilds run here, in the API process that noticed the need, not as a worker job:
the returning user's next read wants the rebuilt timeline, a job would queue it behind
fan-out batches (seconds to minutes under lag, during which the feed answers degraded from
Postgres), and a rebuild is one bounded query plus one script call.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.redis_scripts import AnyRedis
from app.timelines.store import TimelineStore
from app.users.constants import RECENT_MAX
from app.users.constants import TOUCH_EVERY_SECONDS as TOUCH_EVERY_SECONDS

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


class RecentMarks:
    """user -> when this process's gate opens again (monotonic s); at most `max_entries`.

    Every entry lives the same time, so insertion order is expiry order: the oldest is
    evicted first, and a user marked again is moved to the end."""

    def __init__(self, ttl_seconds: float, max_entries: int = RECENT_MAX) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._until: dict[int, float] = {}

    def __len__(self) -> int:
        return len(self._until)

    def fresh(self, user_id: int) -> bool:
        until = self._until.get(user_id)
        return until is not None and until > time.monotonic()

    def add(self, user_id: int) -> None:
        self._until.pop(user_id, None)
        self._until[user_id] = time.monotonic() + self.ttl
        while len(self._until) > self.max_entries:
            del self._until[next(iter(self._until))]

    def clear(self) -> None:
        self._until.clear()


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
        self.recently = RecentMarks(TOUCH_EVERY_SECONDS)

    async def touch_read(self, user_id: int) -> None:
        """A read (a first feed page): `touch`, unless this process marked the user, or
        found them marked, within the hour. Costs nothing then, not even a Redis call."""
        if not self.recently.fresh(user_id):
            await self.touch(user_id)

    async def touch(self, user_id: int, *, force: bool = False) -> None:
        """Record activity; rebuild the timeline of a user coming back from inactivity.
        Past the Redis gate only (log-in passes it with `force`); reads use `touch_read`."""
        try:
            if not force and not await self.redis.set(
                _gate_key(user_id), b"1", nx=True, ex=TOUCH_EVERY_SECONDS
            ):
                self.recently.add(user_id)  # marked within the hour, by some process
                return
        except RedisError:
            return  # Redis down: the feed still answers; activity is marked on a later read
        async with self.engine.begin() as conn:
            previous = (await conn.execute(_TOUCH, {"user": user_id})).scalar_one_or_none()
        self.recently.add(user_id)
        cutoff = datetime.now(UTC) - timedelta(days=self.active_days)
        stale = previous is None or previous < cutoff
        # At log-in (force) a missing timeline is rebuilt too; on reads the feed answers from
        # Postgres meanwhile and schedules that rebuild itself.
        if stale or (force and not await self.timelines.exists(user_id)):
            await self.rebuild(user_id)
