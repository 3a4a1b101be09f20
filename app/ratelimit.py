"""Fixed-window rate limits in Redis: cheap, shared by every API process.

When Redis cannot be reached the same windows are counted in this process instead (a
`LocalWindows`): limits then hold per process rather than cluster-wide, which is looser by
the number of API processes but keeps every mutation (signUp and logIn included) working
instead of failing closed with INTERNAL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from redis.exceptions import RedisError

from app.constants import LOCAL_MAX_BUCKETS
from app.errors import RateLimited
from app.observability.metrics import RATE_LIMIT_FALLBACK, RATE_LIMITED
from app.redis_scripts import AnyRedis

Budget = tuple[str, str, int]
"""(kind: a metric label, e.g. "writes"; bucket: kind and who, e.g. "read-u12"; calls
allowed per window, 0 = no limit)."""

Window = tuple[str, str, int, int]
"""A budget with its own window: (kind, bucket, calls allowed, window seconds)."""


class LocalWindows:
    """In-process fixed windows: the fallback while Redis is unreachable."""

    def __init__(self, max_buckets: int = LOCAL_MAX_BUCKETS) -> None:
        self.max_buckets = max_buckets
        self._counts: dict[str, tuple[int, float]] = {}  # key -> (count, window's end)

    def incr(self, key: str, ends_at: float) -> int:
        if key not in self._counts and len(self._counts) >= self.max_buckets:
            # Past windows can go; if that is not enough, start over (a looser limit).
            now = time.time()
            self._counts = {k: v for k, v in self._counts.items() if v[1] > now}
            if len(self._counts) >= self.max_buckets:
                self._counts.clear()
        count = self._counts.get(key, (0, ends_at))[0] + 1
        self._counts[key] = (count, ends_at)
        return count

    def clear(self) -> None:
        self._counts.clear()


_local = LocalWindows()


def forget_local() -> None:
    """Drop the in-process counts (tests start each from nothing)."""
    _local.clear()
    read_meter.clear()


def _key(bucket: str, window: int) -> str:
    return f"rl:{bucket}:{window}"


async def check_rate(redis: AnyRedis, bucket: str, limit: int, window_seconds: int = 60) -> None:
    """Count one call in the current window; over the limit raises RateLimited with a wait."""
    await check_rates(redis, [("writes", bucket, limit)], window_seconds)


async def check_rates(redis: AnyRedis, budgets: Sequence[Budget], window_seconds: int = 60) -> None:
    """Count one call against each budget (one round trip); the first one over its limit
    raises RateLimited, whose `retry_after` is the seconds until the window turns."""
    await check_windows(redis, [(kind, b, limit, window_seconds) for kind, b, limit in budgets])


async def check_windows(redis: AnyRedis, windows: Sequence[Window]) -> None:
    """`check_rates` for budgets of different window lengths (a minute, an hour, a day)."""
    refused = (await check_windows_many(redis, [windows]))[0]
    if refused is not None:
        raise refused


async def check_windows_many(
    redis: AnyRedis, calls: Sequence[Sequence[Window]]
) -> list[RateLimited | None]:
    """`check_windows` for many callers in one pipeline (sockets opening together); each
    caller's answer in order: None, or the RateLimited it would have raised."""
    now = time.time()
    keys = [[_key(bucket, int(now) // seconds) for _, bucket, _, seconds in w] for w in calls]
    try:
        async with redis.pipeline(transaction=False) as pipe:
            for call_keys, windows in zip(keys, calls, strict=True):
                for key, (*_, seconds) in zip(call_keys, windows, strict=True):
                    pipe.incr(key)
                    pipe.expire(key, seconds + 1)
            replies = await pipe.execute()
        flat = [int(c) for c in replies[::2]]
    except (RedisError, OSError):
        RATE_LIMIT_FALLBACK.inc()
        flat = [
            _local.incr(key, (int(now) // seconds + 1) * seconds)
            for call_keys, windows in zip(keys, calls, strict=True)
            for key, (*_, seconds) in zip(call_keys, windows, strict=True)
        ]
    out: list[RateLimited | None] = []
    at = 0
    for windows in calls:
        counts, at = flat[at : at + len(windows)], at + len(windows)
        out.append(
            next(
                (
                    _refuse(kind, limit, now, seconds)
                    for (kind, _, limit, seconds), count in zip(windows, counts, strict=True)
                    if limit > 0 and count > limit
                ),
                None,
            )
        )
    return out


_UNITS = {60: "minute", 3600: "hour", 86_400: "day"}


def _refuse(kind: str, limit: int, now: float, window_seconds: int) -> RateLimited:
    wait = max(1, window_seconds - int(now) % window_seconds)
    RATE_LIMITED.labels(kind).inc()
    per = _UNITS.get(window_seconds, f"{window_seconds} s")
    return RateLimited(
        f"Too many requests: at most {limit} per {per}. Retry in {wait} s.", retry_after=wait
    )


class ReadMeter:
    """Read budgets counted off the request path: a query is checked against what this
    process counted plus the shared count it last read back from Redis, and the process's
    counts go to Redis in one pipelined INCRBY batch shortly after (FLUSH_SECONDS).

    Why: a read limit is a guard against abuse, not an exact quota, and a Redis round trip
    on every query cost more than the rest of the limit's work together. What it gives up:
    across API processes a client may pass its budget by what the other processes counted
    since their last flush (tens of milliseconds of its traffic); within one process the
    limit is exact. When Redis fails, the counts stay in process (the fallback above).
    """

    FLUSH_SECONDS = 0.05

    def __init__(self, window_seconds: int = 60) -> None:
        self.window_seconds = window_seconds
        self._shared: dict[str, int] = {}  # key -> the count Redis last returned
        self._pending: dict[str, int] = {}  # key -> counted here, not yet sent
        self._flush: asyncio.Task[None] | None = None

    def check(self, redis: AnyRedis, budgets: Sequence[Budget]) -> None:
        now = time.time()
        window = int(now) // self.window_seconds
        keys = [_key(bucket, window) for _, bucket, _ in budgets]
        for key in keys:
            self._pending[key] = self._pending.get(key, 0) + 1
        self._schedule(redis)
        for (kind, _, limit), key in zip(budgets, keys, strict=True):
            if limit > 0 and self._shared.get(key, 0) + self._pending[key] > limit:
                raise _refuse(kind, limit, now, self.window_seconds)

    def _schedule(self, redis: AnyRedis) -> None:
        loop = asyncio.get_running_loop()
        if self._flush is not None and not self._flush.done() and self._flush.get_loop() is loop:
            return
        self._flush = loop.create_task(self._send(redis))

    async def _send(self, redis: AnyRedis) -> None:
        await asyncio.sleep(self.FLUSH_SECONDS)
        batch, self._pending = self._pending, {}
        if not batch:
            return
        window = int(time.time()) // self.window_seconds
        current = f":{window}"
        # Counts of past windows are of no use any more, here or in Redis.
        self._shared = {k: v for k, v in self._shared.items() if k.endswith(current)}
        batch = {k: n for k, n in batch.items() if k.endswith(current)}
        try:
            async with redis.pipeline(transaction=False) as pipe:
                for key, count in batch.items():
                    pipe.incrby(key, count)
                    pipe.expire(key, self.window_seconds + 1)
                replies = await pipe.execute()
            for key, total in zip(batch, replies[::2], strict=True):
                self._shared[key] = int(total)
        except (RedisError, OSError):
            RATE_LIMIT_FALLBACK.inc()
            for key, count in batch.items():
                self._shared[key] = self._shared.get(key, 0) + count
        if self._pending:
            self._schedule(redis)

    def clear(self) -> None:
        self._shared.clear()
        self._pending.clear()


read_meter = ReadMeter()


def read_budgets(ip: str, user_id: int | None, per_ip: int, per_user: int) -> list[Budget]:
    """A query's budgets: the client IP's, and the user's when a token was sent."""
    budgets = [("reads_ip", f"read-ip{ip}", per_ip)]
    if user_id is not None:
        budgets.append(("reads", f"read-u{user_id}", per_user))
    return budgets


def login_budgets(ip: str, per_ip: int) -> list[Budget]:
    """A logIn's attempt budget: the client IP's, whatever token came with the request. The
    guesses at one account are app.auth.guesses' (per account and address, not per account
    alone: a per-account budget let anyone lock its owner out)."""
    return [("login_ip", f"login-ip{ip}", per_ip)]


def signup_budgets(ip: str, per_minute: int, per_hour: int, per_day: int) -> list[Window]:
    """A signUp's budgets, all per client IP whatever token is sent (a new account's token
    must not bring a fresh budget): the write budget per minute, and ceilings on attempts
    (each an Argon2 hash, most a new account) per hour and per day (decision 0020)."""
    return [
        ("writes", f"ip{ip}", per_minute, 60),
        ("signups_ip", f"signup-h-ip{ip}", per_hour, 3600),
        ("signups_ip", f"signup-d-ip{ip}", per_day, 86_400),
    ]
