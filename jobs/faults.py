"""Test-only fault injection, read by the workers when JOB_FAULT_HOOK is on (never in
production): a test makes the next N runs of a job function fail, or stall, by writing a
Redis key, so a worker in another process fails for real without patching its code."""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis


class InjectedFault(ConnectionError):
    """Stands for a transient failure (a failover, a timeout): what the retries are for."""


def fail_key(function: str) -> str:
    """string: how many more runs of `function` fail."""
    return f"jf:{function}"


def stall_key(function: str) -> str:
    """string: while it exists, runs of `function` wait before doing anything."""
    return f"jf:{function}:stall"


def stalled_key(function: str) -> str:
    """string: how many runs of `function` are waiting in a stall right now."""
    return f"jf:{function}:stalled"


async def stalled(redis: Redis, function: str) -> int:
    return int(await redis.get(stalled_key(function)) or 0)


async def fail_next(redis: Redis, function: str, runs: int) -> None:
    await redis.set(fail_key(function), runs)


async def stall(redis: Redis, function: str, on: bool = True) -> None:
    if on:
        await redis.set(stall_key(function), 1)
    else:
        await redis.delete(stall_key(function))


async def check(redis: Redis, function: str) -> None:
    """Called at the start of each run: wait while stalled, then fail if a failure is due."""
    if await redis.exists(stall_key(function)):
        await redis.incr(stalled_key(function))
        try:
            while await redis.exists(stall_key(function)):  # noqa: ASYNC110 - another process clears it
                await asyncio.sleep(0.05)
        finally:
            await asyncio.shield(redis.decr(stalled_key(function)))
    if await redis.exists(fail_key(function)) and await redis.decr(fail_key(function)) >= 0:
        raise InjectedFault(f"injected fault in {function}")
