"""Per-post fan-out completion, so the reconciler can tell a finished fan-out from one
whose jobs were lost.

A post's fan-out is a tree of jobs: the split (`fanout_post`), its FanoutBatch jobs and its
continuations. `fp:<post_id>` holds the ids of the jobs still owed: a job adds the jobs it
queues *before* queuing them and removes itself when it succeeds, and the split is a member
while it runs, so the set is empty only once the whole tree succeeded; the job that empties
it marks `fo:<post_id>` done. A job that failed for good stays a member (it is a dead letter).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from arq.constants import in_progress_key_prefix, job_key_prefix
from redis.asyncio import Redis

from app.config import get_settings

DONE = "done"
ATTEMPTS = "attempts"
GAVE_UP = "gave_up"


def pending_key(post_id: int) -> str:
    """set: ids of the jobs of the post's fan-out not yet succeeded."""
    return f"fp:{post_id}"


def state_key(post_id: int) -> str:
    """hash: `done` (ms), `attempts` (reconciler re-runs), `gave_up` (ms)."""
    return f"fo:{post_id}"


def _ttl() -> int:
    """Kept past the reconciler's window, then forgotten."""
    return get_settings().reconcile_window_seconds + 3600


async def owe(redis: Redis, post_id: int, job_ids: Iterable[str]) -> None:
    """These jobs belong to the post's fan-out and have not succeeded yet."""
    key = pending_key(post_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.sadd(key, *job_ids)
        pipe.expire(key, _ttl())
        await pipe.execute()


async def settle(redis: Redis, post_id: int, job_id: str) -> bool:
    """The job succeeded; True when that completed the post's fan-out."""
    key = pending_key(post_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.srem(key, job_id)
        pipe.scard(key)
        removed, left = await pipe.execute()
    if removed and left == 0:
        await mark(redis, post_id, DONE)
        return True
    return False


async def mark(redis: Redis, post_id: int, field: str) -> None:
    key = state_key(post_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hset(key, field, str(int(time.time() * 1000)))
        pipe.expire(key, _ttl())
        await pipe.execute()


async def finished(redis: Redis, post_ids: list[int]) -> list[bool]:
    """Per post: its fan-out completed, or the reconciler gave up on it."""
    async with redis.pipeline(transaction=False) as pipe:
        for post_id in post_ids:
            pipe.hmget(state_key(post_id), [DONE, GAVE_UP])
        replies = await pipe.execute()
    return [any(v is not None for v in reply) for reply in replies]


async def alive(redis: Redis, post_id: int, also: Iterable[str] = ()) -> bool:
    """Is any job still owed by the post's fan-out (or in `also`) queued, waiting for a
    retry or running? ARQ keeps a job's key until it finishes, whatever its lane."""
    members = await redis.smembers(pending_key(post_id))  # type: ignore[misc]
    ids = [*(m.decode() if isinstance(m, bytes) else m for m in members), *also]
    if not ids:
        return False
    keys = [job_key_prefix + i for i in ids] + [in_progress_key_prefix + i for i in ids]
    return int(await redis.exists(*keys)) > 0


async def next_attempt(redis: Redis, post_id: int) -> int:
    """Count one more re-run by the reconciler; the attempt's number (1, 2, ...)."""
    key = state_key(post_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hincrby(key, ATTEMPTS, 1)
        pipe.expire(key, _ttl())
        replies = await pipe.execute()
    return int(replies[0])


async def restart(redis: Redis, post_id: int, job_id: str) -> None:
    """The fan-out runs again as `job_id`: forget what the lost run owed."""
    key = pending_key(post_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.delete(key)
        pipe.sadd(key, job_id)
        pipe.expire(key, _ttl())
        await pipe.execute()


async def attempts(redis: Redis, post_id: int) -> int:
    value = await redis.hget(state_key(post_id), ATTEMPTS)  # type: ignore[misc]
    return int(value or 0)
