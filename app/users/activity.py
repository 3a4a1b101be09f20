"""Activity tracking: who counts as an active follower (gets pushed timelines).

A user active within ACTIVE_DAYS receives fan-out; one who was away longer received none,
so their timeline is stale even if its key survived: it is rebuilt when they come back.
Reads mark activity at most once an hour (a Redis gate) to keep the write off the hot path.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from redis.exceptions import RedisError
from sqlalchemy import text

from app.state import AppState

TOUCH_EVERY_SECONDS = 3600

_TOUCH = text(
    """
    WITH old AS (SELECT id, last_active_at FROM users WHERE id = :user FOR UPDATE)
    UPDATE users SET last_active_at = now() FROM old WHERE users.id = old.id
    RETURNING old.last_active_at
    """
)


def _gate_key(user_id: int) -> str:
    return f"act:{{{int(user_id)}}}"


async def touch(state: AppState, user_id: int, *, force: bool = False) -> None:
    """Record activity; rebuild the timeline of a user coming back from inactivity."""
    try:
        if not force and not await state.redis.set(
            _gate_key(user_id), b"1", nx=True, ex=TOUCH_EVERY_SECONDS
        ):
            return
    except RedisError:
        return  # Redis down: the feed still answers; activity is marked on a later read
    async with state.engine.begin() as conn:
        previous = (await conn.execute(_TOUCH, {"user": user_id})).scalar_one_or_none()
    cutoff = datetime.now(UTC) - timedelta(days=state.settings.active_days)
    stale = previous is None or previous < cutoff
    # At log-in (force) a missing timeline is rebuilt too; on reads the feed answers from
    # Postgres meanwhile and schedules that rebuild itself.
    if stale or (force and not await state.timelines.exists(user_id)):
        await state.fanout.rebuild_timeline(user_id)
