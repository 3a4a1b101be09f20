"""The reconciler's marks on one tracked thing: a Redis hash with `done` (ms it completed),
`attempts` (the reconciler's re-runs) and `gave_up` (ms it was dead-lettered), kept past the
reconciler's window. A post's fan-out (jobs.tracking, `fo:<post>`) and an outbox event's own
job (jobs.event_tracking, `ej:<job id>`) keep the same marks under their own key: every
helper here takes the key, built by its owner."""

from __future__ import annotations

import time
from collections.abc import Sequence

from redis.asyncio import Redis

from app.config import Settings

DONE = "done"
ATTEMPTS = "attempts"
GAVE_UP = "gave_up"


def ttl_seconds(settings: Settings) -> int:
    """How long marks (and jobs.tracking's keys) are kept, every writer's `ttl`: past the
    reconciler's window, then forgotten."""
    return settings.reconcile_window_seconds + 3600


async def mark(redis: Redis, key: str, field: str, *, ttl: int) -> None:
    """Set `field` (DONE, GAVE_UP) to now, in ms."""
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hset(key, field, str(int(time.time() * 1000)))
        pipe.expire(key, ttl)
        await pipe.execute()


async def finished(redis: Redis, keys: Sequence[str]) -> list[bool]:
    """Per key: done, or the reconciler gave up on it (a dead letter). One round trip."""
    async with redis.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.hmget(key, [DONE, GAVE_UP])
        replies = await pipe.execute()
    return [any(v is not None for v in reply) for reply in replies]


async def next_attempt(redis: Redis, key: str, *, ttl: int) -> int:
    """Count one more re-run by the reconciler; the attempt's number (1, 2, ...)."""
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hincrby(key, ATTEMPTS, 1)
        pipe.expire(key, ttl)
        replies = await pipe.execute()
    return int(replies[0])


async def attempts(redis: Redis, key: str) -> int:
    """The reconciler's re-runs so far."""
    value = await redis.hget(key, ATTEMPTS)
    return int(value or 0)
