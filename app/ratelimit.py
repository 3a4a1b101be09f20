"""Fixed-window rate limits in Redis: cheap, shared by every API process."""

from __future__ import annotations

import time

from redis.asyncio import Redis

from app.errors import RateLimited


async def check_rate(redis: Redis, bucket: str, limit: int, window_seconds: int = 60) -> None:
    """Count one call in the current window; over the limit raises RateLimited with a wait."""
    window = int(time.time()) // window_seconds
    key = f"rl:{bucket}:{window}"
    async with redis.pipeline(transaction=False) as pipe:
        pipe.incr(key)
        pipe.expire(key, window_seconds + 1)
        count, _ = await pipe.execute()
    if count > limit:
        wait = window_seconds - int(time.time()) % window_seconds
        raise RateLimited(f"Too many requests: at most {limit} per minute. Retry in {wait} s.")
