"""Fan-out lag in seconds per lane: the age of the oldest job waiting in the ARQ queue.

ARQ scores a queued job by the time it may run (ms), so the lowest score of a lane's zset
is its oldest pending job. Counting messages would hide a stuck celebrity batch.
"""

from __future__ import annotations

import time

from redis.asyncio import Redis

from app.fanout import lanes


async def lane_lag_seconds(redis: Redis) -> dict[str, tuple[float, int]]:
    """lane name -> (oldest pending job age in seconds, jobs waiting)."""
    now_ms = time.time() * 1000
    async with redis.pipeline(transaction=False) as pipe:
        for queue in lanes.LANES.values():
            pipe.zrange(queue, 0, 0, withscores=True)
            pipe.zcard(queue)
        replies = await pipe.execute()
    result: dict[str, tuple[float, int]] = {}
    for i, name in enumerate(lanes.LANES):
        oldest, waiting = replies[2 * i], replies[2 * i + 1]
        age = max(0.0, (now_ms - oldest[0][1]) / 1000) if oldest else 0.0
        result[name] = (age, int(waiting))
    return result


class LagProbe:
    """Cached view of the lanes' lag for the read path (one Redis call per second at most)."""

    def __init__(
        self, redis: Redis, threshold_seconds: float, refresh_seconds: float = 1.0
    ) -> None:
        self.redis = redis
        self.threshold = threshold_seconds
        self.refresh = refresh_seconds
        self._checked = 0.0
        self._lagging = False

    async def lagging(self) -> bool:
        now = time.monotonic()
        if now - self._checked >= self.refresh:
            self._checked = now
            lags = await lane_lag_seconds(self.redis)
            self._lagging = any(age > self.threshold for age, _ in lags.values())
        return self._lagging
