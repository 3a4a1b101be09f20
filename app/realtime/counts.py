"""The running "new posts" count per user, kept in Redis so every API process and every
reconnect sees the same number, and the notifications that announce it.

Why a zset of post ids and not a counter: fan-out batches are retried and replayed, and a
pull-mode post may be counted by two API processes that both hold a socket of the user. ZADD
of a member already there changes nothing, so the count stays exact under all of those.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from app.realtime import keys
from app.realtime.metrics import PUBLISHED
from app.realtime.settings import RealtimeSettings, get_realtime_settings

AnyRedis = Redis | RedisCluster
Entry = Sequence[int]
"""(post_id, created_at_ms), as fan-out batches carry them."""

SCRIPT_KEYS = 500  # users per EVALSHA on a standalone server: one round trip, bounded blocking


@dataclass(frozen=True)
class Script:
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


# Add posts to many users' counts. KEYS: count keys. ARGV: ttl, max, now_ms, mode, channel
# prefix, n, score1, member1, ..., scoreN, memberN, then one user id per key.
# mode 'p': publish "count:latest:now" to <prefix><id> when the count grew; returns publishes.
# mode 'r': publish nothing; returns a flat list count1, latest1, count2, latest2, ...
ADD = Script(
    """
local ttl, max, now, mode, prefix = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5]
local n = tonumber(ARGV[6])
local zargs = {}
for j = 7, 6 + 2 * n do zargs[#zargs + 1] = ARGV[j] end
local base = 6 + 2 * n
local out, published = {}, 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local added = 0
  if n > 0 then
    added = redis.call('ZADD', key, unpack(zargs))
    redis.call('EXPIRE', key, ttl)
  end
  local card = redis.call('ZCARD', key)
  if card > max then
    redis.call('ZREMRANGEBYRANK', key, 0, card - max - 1)
    card = max
  end
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local latest = top[2] or '0'
  if mode == 'p' then
    if added > 0 then
      redis.call('PUBLISH', prefix .. ARGV[base + i], card .. ':' .. latest .. ':' .. now)
      published = published + 1
    end
  else
    out[#out + 1] = card
    out[#out + 1] = latest
  end
end
if mode == 'p' then return published end
return out
"""
)

# Reset after a fresh first page of the feed. KEYS: count key, reset key. ARGV: upto ms
# ('' = everything), reset ms, ttl, now_ms, user channel. Publishes the count when it changed.
RESET = Script(
    """
local removed
if ARGV[1] == '' then
  removed = redis.call('ZCARD', KEYS[1])
  redis.call('DEL', KEYS[1])
else
  removed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
if removed > 0 then
  local card = redis.call('ZCARD', KEYS[1])
  local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PUBLISH', ARGV[5], card .. ':' .. (top[2] or '0') .. ':' .. ARGV[4])
end
return removed
"""
)

# The reset mark, set to now when missing. KEYS: reset key. ARGV: now_ms, ttl.
MARK = Script(
    """
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return ARGV[1]
"""
)


@dataclass(frozen=True, slots=True)
class FeedCount:
    """One user's state as announced: what `feedUpdates` sends."""

    count: int
    latest_ms: int | None
    published_ms: float = 0.0  # wall clock of the publish, for publish-to-deliver latency


def now_ms() -> int:
    return int(time.time() * 1000)


def decode_count(data: bytes) -> FeedCount:
    """A user-channel message: b"count:latest_ms:published_ms" (latest 0 = none)."""
    count, latest, published = data.split(b":")
    latest_ms = int(float(latest))
    return FeedCount(int(count), latest_ms or None, float(published))


async def _eval(redis: AnyRedis, script: Script, keys_: Sequence[str], args: Sequence[Any]) -> Any:
    """One EVALSHA; on NOSCRIPT (first use, restart, SCRIPT FLUSH) load it and retry."""
    try:
        return await redis.evalsha(script.sha, len(keys_), *keys_, *args)  # type: ignore[misc]
    except NoScriptError:
        await redis.script_load(script.source)
        return await redis.evalsha(script.sha, len(keys_), *keys_, *args)  # type: ignore[misc]


async def _eval_users(
    redis: AnyRedis, script: Script, user_ids: Sequence[int], head: Sequence[Any]
) -> list[Any]:
    """ADD over many users: chunks of SCRIPT_KEYS keys on a standalone server, one key per
    call on a cluster (a script's keys must share a slot), all calls pipelined."""
    size = 1 if isinstance(redis, RedisCluster) else SCRIPT_KEYS
    chunks = [user_ids[i : i + size] for i in range(0, len(user_ids), size)]
    if len(chunks) == 1:
        ids = chunks[0]
        return [await _eval(redis, script, [keys.count_key(u) for u in ids], [*head, *ids])]
    for attempt in range(2):
        pipe = redis.pipeline(transaction=False)
        for ids in chunks:
            ks = [keys.count_key(u) for u in ids]
            args: list[Any] = [*ks, *head, *ids]
            pipe.evalsha(script.sha, len(ks), *args)
        try:
            return list(await pipe.execute())
        except NoScriptError:
            if attempt:
                raise
            await redis.script_load(script.source)
    raise AssertionError("unreachable")


def _head(
    redis: AnyRedis, entries: Sequence[Entry], mode: str, settings: RealtimeSettings
) -> list[Any]:
    flat: list[Any] = []
    for post_id, score in entries:
        flat += [int(score), int(post_id)]
    prefix = keys.Channels.for_redis(redis, settings.namespace).user_prefix
    ttl, max_ = settings.count_ttl_seconds, settings.count_max
    return [ttl, max_, now_ms(), mode, prefix, len(entries), *flat]


async def add_and_publish(
    redis: AnyRedis,
    user_ids: Sequence[int],
    entries: Sequence[Entry],
    settings: RealtimeSettings | None = None,
) -> int:
    """Count pushed posts for these users and publish each user's new count (workers).

    One script call per SCRIPT_KEYS users. A user whose count did not grow (a replayed
    batch) is not notified again. Returns the number of notifications published.
    """
    if not user_ids or not entries:
        return 0
    settings = settings or get_realtime_settings()
    online = await online_users(redis, user_ids, settings)
    if not online:
        return 0
    head = _head(redis, entries, "p", settings)
    published = sum(int(r) for r in await _eval_users(redis, ADD, online, head))
    PUBLISHED.labels("user").inc(published)
    return published


async def online_users(
    redis: AnyRedis, user_ids: Sequence[int], settings: RealtimeSettings
) -> list[int]:
    """The users a hub held a socket for within the grace period (one ZMSCORE)."""
    key = keys.Channels.for_redis(redis, settings.namespace).online_key
    seen = await redis.execute_command("ZMSCORE", key, *user_ids)
    cutoff = now_ms() - settings.online_grace_seconds * 1000
    return [
        u for u, ms in zip(user_ids, seen, strict=True) if ms is not None and float(ms) >= cutoff
    ]


async def mark_online(redis: AnyRedis, user_ids: Sequence[int], settings: RealtimeSettings) -> None:
    """Hubs call this for their connected users on subscribe and periodically after."""
    if not user_ids:
        return
    key = keys.Channels.for_redis(redis, settings.namespace).online_key
    now = now_ms()
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zadd(key, {str(u): now for u in user_ids})
        pipe.zremrangebyscore(key, "-inf", now - settings.online_grace_seconds * 1000)
        await pipe.execute()


async def add_for_users(
    redis: AnyRedis,
    user_ids: Sequence[int],
    entries: Sequence[Entry],
    settings: RealtimeSettings | None = None,
) -> dict[int, FeedCount]:
    """Count posts for these users without publishing; their current counts (API hubs).

    With no entries this only reads. Used for pull-mode posts delivered by each API process
    to its own sockets, and for the catch-up when a subscriber connects.
    """
    if not user_ids:
        return {}
    settings = settings or get_realtime_settings()
    ids = list(user_ids)
    replies = await _eval_users(redis, ADD, ids, _head(redis, entries, "r", settings))
    flat = [x for reply in replies for x in reply]
    out: dict[int, FeedCount] = {}
    for i, user_id in enumerate(ids):
        latest = int(float(flat[2 * i + 1]))
        out[user_id] = FeedCount(int(flat[2 * i]), latest or None)
    return out


async def reset_mark(
    redis: AnyRedis, user_id: int, settings: RealtimeSettings | None = None
) -> int:
    """When the user's count was last reset (ms); set to now on first use."""
    settings = settings or get_realtime_settings()
    raw = await _eval(
        redis, MARK, [keys.reset_key(user_id)], [now_ms(), settings.count_ttl_seconds]
    )
    return int(raw)


async def reset_new_post_count(
    redis: AnyRedis, user_id: int, *, seen_upto_ms: int | None = None
) -> None:
    """The viewer read a fresh first page of `feed`: their new-post count starts again at 0.

    `seen_upto_ms` (optional): only posts created at or before it are forgotten, so a post
    fanned out while the page was being built still counts. Connected sockets of the user,
    on any API process, get the new count at once.
    """
    settings = get_realtime_settings()
    now = now_ms()
    mark = now if seen_upto_ms is None else min(now, int(seen_upto_ms))
    upto = "" if seen_upto_ms is None else str(int(seen_upto_ms))
    channel = keys.Channels.for_redis(redis, settings.namespace).user(user_id)
    args = [upto, mark, settings.count_ttl_seconds, now, channel]
    removed = await _eval(redis, RESET, [keys.count_key(user_id), keys.reset_key(user_id)], args)
    if int(removed):
        PUBLISHED.labels("reset").inc()
