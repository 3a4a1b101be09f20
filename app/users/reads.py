"""How often active users read their feeds: the measured input of the fan-out control plane's
read cost (docs/decisions/0027-measured-read-rate.md).

A pulled author costs every reader's feed read that gathers candidates (a first page, a
keyset page; not a page of a frozen session). `ReadCounter.count` adds one such read in the
process (no I/O); a flush a second later adds the process's count to a per-minute counter in
Redis shared by every process. `reads_per_active_user` reads the last window's minutes back
and divides by the users active within ACTIVE_DAYS (a count cached a minute).

Owner of the key family `frr:{reads}:*` (docs/redis-keys.md): one hash tag, so the minute
counters of a window are read with one MGET on a cluster too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta

from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.redis_scripts import AnyRedis
from app.users.constants import ACTIVE_TTL_SECONDS, FLUSH_SECONDS, MINUTE_TTL_SECONDS

log = logging.getLogger(__name__)

SINCE_KEY = "frr:{reads}:since"  # ms of the first minute ever counted: how much is observed
ACTIVE_KEY = "frr:{reads}:active"  # users active within ACTIVE_DAYS, cached

_COUNT_ACTIVE_USERS = text("SELECT count(*) FROM users WHERE last_active_at >= :since")


def minute_key(minute: int) -> str:
    """`frr:{reads}:m:<minute>`: feed reads that gathered candidates in that minute (epoch)."""
    return f"frr:{{reads}}:m:{minute}"


class ReadCounter:
    """Counts candidate-gathering feed reads in the process; flushed to Redis each second."""

    def __init__(self, redis: AnyRedis) -> None:
        self.redis = redis
        self._pending = 0
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def count(self) -> None:
        self._pending += 1
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a script): the caller flushes
        self._timer = loop.call_later(FLUSH_SECONDS, self._start_flush, loop)

    def _start_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        task = loop.create_task(self._flush_logged())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flush_logged(self) -> None:
        try:
            await self.flush()
        except RedisError:  # best effort: a lost second of counts only lowers the estimate
            log.warning("feed read count flush failed", exc_info=True)

    async def flush(self, now: float | None = None) -> int:
        count, self._pending = self._pending, 0
        if not count:
            return 0
        now = time.time() if now is None else now
        key = minute_key(int(now // 60))
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.incrby(key, count)
            pipe.expire(key, MINUTE_TTL_SECONDS)
            pipe.set(SINCE_KEY, int(now * 1000), nx=True)
            await pipe.execute()
        return count

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task
        with contextlib.suppress(RedisError, OSError):
            await self.flush()


async def reads_in_window(
    redis: AnyRedis, window_seconds: int, now: float | None = None
) -> tuple[int, float]:
    """(reads counted in the window's minutes, the current one included; the seconds those
    minutes cover since counting began)."""
    now = time.time() if now is None else now
    current = int(now // 60)
    minutes = list(range(current - max(1, window_seconds // 60) + 1, current + 1))
    async with redis.pipeline(transaction=False) as pipe:
        # Raw MGET: redis-py's cluster pipeline refuses its mget(); the keys share {reads}.
        pipe.execute_command("MGET", *(minute_key(m) for m in minutes))
        pipe.get(SINCE_KEY)
        counts, since = await pipe.execute()
    reads = sum(int(c) for c in counts if c is not None)
    if since is None:
        return reads, 0.0
    start = max(minutes[0] * 60.0, int(since) / 1000)
    return reads, max(0.0, now - start)


async def active_users(
    session: AsyncSession, redis: AnyRedis, active_days: int, cap: int | None = None
) -> int:
    """Users active within ACTIVE_DAYS, cached ACTIVE_TTL_SECONDS."""
    cached = await redis.get(ACTIVE_KEY)
    if cached is not None:
        return int(cached)
    since = datetime.now(UTC) - timedelta(days=active_days)
    count = int(await session.scalar(_COUNT_ACTIVE_USERS, {"since": since}) or 0)
    await redis.set(ACTIVE_KEY, count, ex=ACTIVE_TTL_SECONDS)
    return count


async def reads_per_active_user(
    session: AsyncSession,
    redis: AnyRedis,
    window_seconds: int,
    active_days: int,
    min_reads: int,
    now: float | None = None,
) -> float | None:
    """Candidate-gathering feed reads per active user per window, scaled from the part of the
    window observed so far; None until a minute and `min_reads` reads were seen (the
    configured prior applies meanwhile)."""
    reads, observed = await reads_in_window(redis, window_seconds, now)
    if observed < 60 or reads < min_reads:
        return None
    users = await active_users(session, redis, active_days)
    if users == 0:
        return None
    return reads * (window_seconds / min(observed, window_seconds)) / users
