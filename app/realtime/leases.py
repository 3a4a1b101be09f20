"""Caps on what one account or one client address holds open at once (websockets, live
subscriptions), counted across every API process.

Why leases and not counters: a counter that a process increments and decrements is wrong
forever once that process dies holding sockets. Here every open thing is a member of a zset
whose score is the time its lease runs out; each process renews its own members every third
of `lease_seconds`, and a count first drops the members whose lease ran out. A crashed
process's sockets stop counting after at most `lease_seconds`.

Keys (`ws:` family, docs/redis-keys.md): `ws:{<user_id>}:<kind>` for an account (its hash
tag, so the family lives on the user's slot) and `ws:ip:<address>:<kind>` for an address.

While Redis cannot be reached, a cap is checked against this process's own holds: it then
holds per process, which is looser by the number of API processes, instead of refusing
every socket (the same trade as the rate limits' fallback, app.ratelimit).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from app.coalesce import Coalesced
from app.realtime.constants import LEASE_KEY_SLACK_MS, RENEW_BATCH
from app.redis_scripts import AnyRedis, LuaScript, run_script_many

log = logging.getLogger("app.realtime")

SOCKETS = "s"
SUBSCRIPTIONS = "f"

_ACQUIRE = LuaScript(
    "lease_acquire",
    """
local now, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held >= cap then return held end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return -1
""",
)


# Every key's members pushed to ARGV[1] (the new deadline); ARGV[2]: the keys' TTL in ms; per
# key its member count and members. One call renews RENEW_BATCH keys: 10,000 sockets cost
# 20 EVALSHAs every 20 s instead of 20,000 pipelined commands (~0.5 s of redis-py's Python).
_RENEW = LuaScript(
    "lease_renew",
    """
local deadline, ttl, at = ARGV[1], ARGV[2], 3
for _, key in ipairs(KEYS) do
  local n = tonumber(ARGV[at])
  for first = 1, n, 1000 do  -- unpack() has a bounded stack: ZADD 1,000 at a time
    local args = {}
    for i = first, math.min(n, first + 999) do
      args[#args + 1] = deadline
      args[#args + 1] = ARGV[at + i]
    end
    redis.call('ZADD', key, unpack(args))
  end
  redis.call('PEXPIRE', key, ttl)
  at = at + n + 1
end
return 0
""",
)


def user_key(user_id: int, kind: str) -> str:
    return f"ws:{{{int(user_id)}}}:{kind}"


def address_key(address: str, kind: str) -> str:
    return f"ws:ip:{address}:{kind}"


@dataclass(frozen=True)
class Cap:
    """One limit to check: the key counted, how many it may hold, and who it is for."""

    key: str
    limit: int
    who: str  # "account" or "address": for the refusal's message


class CapReached(Exception):
    def __init__(self, cap: Cap) -> None:
        super().__init__(cap.key)
        self.cap = cap


@dataclass(slots=True)  # one or two per socket, held for its life
class Hold:
    """What `acquire` took: release it exactly once (idempotent)."""

    leases: Leases
    keys: tuple[str, ...]
    member: str
    released: bool = False

    async def release(self) -> None:
        if not self.released:
            self.released = True
            await self.leases.release(self)


class Leases:
    """The process's holds, with their renewal and their release."""

    def __init__(self, redis: AnyRedis, lease_seconds: float) -> None:
        self.redis = redis
        self.lease_ms = int(lease_seconds * 1000)
        self._process = secrets.token_hex(6)
        self._ids = itertools.count(1)
        # key -> the members this process holds: one (a str: most keys, a user's sockets
        # or subscriptions, have one member here) or more (a set; ~200 B less per key).
        self._held: dict[str, str | set[str]] = {}
        self._together: Coalesced[tuple[list[Cap], Hold], Hold] = Coalesced(
            self._acquire_batch, orphaned=self._orphaned
        )
        self._releasing: set[asyncio.Task[None]] = set()

    def held(self, key: str) -> int:
        """Members of `key` held by this process."""
        members = self._held.get(key)
        if members is None:
            return 0
        return 1 if isinstance(members, str) else len(members)

    async def acquire(self, caps: Iterable[Cap]) -> Hold:
        """One member under every cap, or CapReached naming the first one that is full
        (nothing is taken then). Caps with a limit of 0 are off.

        Batched with the other sockets and subscriptions opening at the same time: a
        reconnect storm pays one pipeline per batch instead of one script call per socket."""
        caps = [c for c in caps if c.limit > 0]
        member = f"{self._process}:{next(self._ids)}"
        hold = Hold(self, tuple(c.key for c in caps), member)
        if not caps:
            return hold
        return await self._together((caps, hold))

    def _orphaned(self, hold: Hold) -> None:
        """A hold whose caller was cancelled while its batch ran: give it back."""
        task = asyncio.ensure_future(hold.release())
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _acquire_batch(self, items: list[tuple[list[Cap], Hold]]) -> list[Hold | CapReached]:
        out: list[Hold | CapReached | None] = [None] * len(items)
        going: list[int] = []  # items checked in Redis
        calls: list[tuple[list[str], list[object]]] = []
        now = int(time.time() * 1000)
        for i, (caps, hold) in enumerate(items):
            # This process alone may fill a cap (and must, while Redis is away); in order,
            # so the holds of earlier items in the batch count.
            full = next((cap for cap in caps if self.held(cap.key) >= cap.limit), None)
            if full is not None:
                out[i] = CapReached(full)
                continue
            for key in hold.keys:
                self._hold_member(key, hold.member)
            going.append(i)
            calls += [
                (
                    [c.key],
                    [
                        now,
                        c.limit,
                        now + self.lease_ms,
                        hold.member,
                        self.lease_ms + LEASE_KEY_SLACK_MS,
                    ],
                )
                for c in caps
            ]
        try:
            replies: list[object] = list(await run_script_many(self.redis, _ACQUIRE, calls))
        except (RedisError, OSError):
            log.warning("Redis unavailable: socket caps counted per process", exc_info=True)
            replies = [-1] * len(calls)
        refused: list[Hold] = []
        at = 0
        for i in going:
            caps, hold = items[i]
            mine = replies[at : at + len(caps)]
            at += len(caps)
            full_caps = [c for c, r in zip(caps, mine, strict=True) if int(str(r)) >= 0]
            if full_caps:
                refused.append(hold)
                out[i] = CapReached(full_caps[0])
            else:
                out[i] = hold
        for hold in refused:
            await hold.release()
        return [answer for answer in out if answer is not None]

    async def release(self, hold: Hold) -> None:
        for key in hold.keys:
            members = self._held.get(key)
            if members == hold.member:
                del self._held[key]
            elif isinstance(members, set):
                members.discard(hold.member)
                if not members:
                    del self._held[key]
        if not hold.keys:
            return
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for key in hold.keys:
                    pipe.zrem(key, hold.member)
                await pipe.execute()
        except (RedisError, OSError):
            pass  # the lease runs out by itself

    def _hold_member(self, key: str, member: str) -> None:
        members = self._held.get(key)
        if members is None:
            self._held[key] = member
        elif isinstance(members, str):
            if members != member:
                self._held[key] = {members, member}
        else:
            members.add(member)

    async def release_all(self) -> None:
        """Give back everything this process holds (shutdown): its clients reconnect to
        another process at once, and must not find their old sockets still counted."""
        held, self._held = self._held, {}
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for key, members in held.items():
                    pipe.zrem(key, *_members(members))
                await pipe.execute()
        except (RedisError, OSError):
            pass  # the leases run out by themselves

    async def renew(self, pause: Callable[[], Awaitable[None]] | None = None) -> None:
        """Push the lease of everything this process holds `lease_seconds` ahead.

        RENEW_BATCH keys at a time, each batch built and sent after the last one's answer:
        built all at once, 5,000 sockets' 10,000 keys held the event loop for 70-95 ms of
        argument packing every `lease_seconds / 3`, and a broadcast caught behind it had
        its last frame that much later (docs/benchmarks/archive.md, "Live sockets, round 3"). A
        key released meanwhile is not renewed (its member would linger until the lease).
        `pause`, awaited before each batch, lets the hub hold the renewal back while a
        broadcast is being written (decision 0062); the deadline is taken per batch so a
        pause does not shorten the lease it grants."""
        # A script's keys must share a slot on a cluster: one key per call there.
        per_call = 1 if isinstance(self.redis, RedisCluster) else RENEW_BATCH
        keys = list(self._held)
        for start in range(0, len(keys), RENEW_BATCH):
            if pause is not None:
                await pause()
            until = int(time.time() * 1000) + self.lease_ms
            held = [(k, self._held.get(k)) for k in keys[start : start + RENEW_BATCH]]
            items = [(k, sorted(_members(m))) for k, m in held if m is not None]
            calls: list[tuple[list[str], list[object]]] = []
            for i in range(0, len(items), per_call):
                batch = items[i : i + per_call]
                args: list[object] = [until, self.lease_ms + LEASE_KEY_SLACK_MS]
                for _, members in batch:
                    args += [len(members), *members]
                calls.append(([key for key, _ in batch], args))
            if calls:
                await run_script_many(self.redis, _RENEW, calls)


def _members(members: str | set[str]) -> set[str]:
    return {members} if isinstance(members, str) else members
