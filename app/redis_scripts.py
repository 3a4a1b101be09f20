"""Lua scripts on Redis: the one place that runs EVALSHA and reloads a script on NOSCRIPT.

Scripts are registered once (SHA1 computed locally) and run with EVALSHA, so a call needs no
SCRIPT LOAD round trip first. A server that does not know the script yet (first use, restart,
SCRIPT FLUSH) answers NOSCRIPT: the script is loaded and the call repeated, once. Every script
this service runs is idempotent, so repeating a whole pipeline after a NOSCRIPT is safe.

Commands go out raw (`execute_command("EVALSHA", ...)`), never through redis-py's `evalsha()`:
the cluster client's pipeline refuses that method, while the raw command is routed by its
keys on a cluster and works the same on a standalone server.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

AnyRedis = Redis | RedisCluster
"""A standalone server or a cluster: every Redis user here accepts either."""

Call = tuple[Sequence[Any], Sequence[Any]]
"""One script call: (keys, args)."""


@dataclass(frozen=True)
class LuaScript:
    """A script source with its SHA1."""

    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


def _command(script: LuaScript, keys: Sequence[Any], args: Sequence[Any]) -> tuple[Any, ...]:
    return ("EVALSHA", script.sha, len(keys), *keys, *args)


async def run_script(
    redis: AnyRedis, script: LuaScript, keys: Sequence[Any], args: Sequence[Any]
) -> Any:
    """One EVALSHA; on NOSCRIPT load the script and retry."""
    try:
        return await redis.execute_command(*_command(script, keys, args))
    except NoScriptError:
        await redis.script_load(script.source)
        return await redis.execute_command(*_command(script, keys, args))


async def run_script_many(redis: AnyRedis, script: LuaScript, calls: Sequence[Call]) -> list[Any]:
    """Many calls of one script in one pipeline (one round trip per node), replies in order.

    A single call goes out alone; on NOSCRIPT the script is loaded and the pipeline repeated.
    On a cluster each call's keys must share a slot (the caller groups them).
    """
    if not calls:
        return []
    if len(calls) == 1:
        return [await run_script(redis, script, *calls[0])]
    for attempt in range(2):
        pipe = redis.pipeline(transaction=False)
        for keys, args in calls:
            pipe.execute_command(*_command(script, keys, args))
        try:
            return list(await pipe.execute())
        except NoScriptError:
            if attempt:
                raise
            await redis.script_load(script.source)
    raise AssertionError("unreachable")
