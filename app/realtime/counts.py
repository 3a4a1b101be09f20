"""The running "new posts" count per user, kept in Redis so every API process and every
reconnect sees the same number, and the notifications that announce it.

Why a zset of post ids and not a counter: fan-out batches are retried and replayed, and a
pull-mode post may be counted by two API processes that both hold a socket of the user. ZADD
of a member already there changes nothing, so the count stays exact under all of those.

Why counts honour the social graph on their own: an unfollow or block must silence the other
user at once, while fan-out jobs queued before it may still arrive (queue lag) and the async
timeline cleanup may not have run. `stop_counting` (run by the graph mutation right after its
commit) marks the pair in `fuc:{<user>}` and removes that author's counted posts, and every
count script rejects the author's posts older than the mark. A later (re)follow only lowers
the mark to the follow time: posts made since count again, older ones never resurface.

Why a delete leaves the counts on its own too: a deleted (or newly PRIVATE) post must not stay
"new" until the next first page. `forget_posts` (run by the post-change job) removes it from
every follower's count (ZREM: only where it was counted, never twice) and announces the lower
count; for a delete it also leaves a tombstone `p<post_id>` in the stop-marks key of each
online follower, so a fan-out batch or pull-mode delivery already past its own SQL check
cannot count the post again after it was removed.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster

from app.config import Settings
from app.realtime import keys
from app.realtime.keys import stops_key
from app.realtime.metrics import PUBLISHED
from app.redis_scripts import AnyRedis, LuaScript, ScriptTail, run_script, run_script_many
from app.timelines.scripts import PUSH_FRAGMENT
from app.timelines.store import TIMELINE_ID_SPAN, TimelineStore, timeline_keys

Entry = Sequence[int]
"""(post_id, created_at_ms), as fan-out batches carry them, or (post_id, created_at_ms,
author_id): with the author known, the pair's stop mark applies (see `stop_counting`)."""

SCRIPT_KEYS = 500  # users per EVALSHA on a standalone server: one round trip, bounded blocking
# Stop mark of a pair while it is cut (unfollowed or blocked): above every post's ms, so none
# of the author's posts counts; exact as a double, so Lua compares it exactly.
STOPPED = 2**53 - 1
# How stale a worker's guess of the online set may be (`OnlineUsers`): a user who connected
# since costs the batch a second call, not a count.
ONLINE_REFRESH_SECONDS = 1.0


# The counting of ADD as a Lua fragment, shared with PUSH_AND_COUNT (the fan-out's insert and
# count in one call): `count_args(b)` reads the head from ARGV[b+1]: ttl, max, now_ms, mode,
# channel prefix, n, na, then n triples score, member, author index (1..na; 0 = author
# unknown), then na author ids, and returns the ARGV index the user ids start after;
# `count_user(key, marks, uid)` counts the posts for one user (its count key and stop-marks
# key): a post whose author has a stop mark >= its score, or that has a tombstone
# `p<post_id>` (a delete), is not counted for that user (one ZMSCORE per user over the authors
# and posts). mode 'p': publishes "count:latest:now" to <prefix><uid> when the count grew.
# Returns (added, card, latest).
_COUNT_LIB = """
local C = {}
local function count_args(b)
  C.ttl, C.max, C.now, C.mode, C.prefix = ARGV[b + 1], tonumber(ARGV[b + 2]), ARGV[b + 3],
    ARGV[b + 4], ARGV[b + 5]
  C.n, C.na = tonumber(ARGV[b + 6]), tonumber(ARGV[b + 7])
  C.zargs, C.scores, C.members, C.owner, C.names = {}, {}, {}, {}, {}
  for j = 1, C.n do
    local t = b + 5 + 3 * j
    C.scores[j], C.members[j], C.owner[j] = tonumber(ARGV[t]), ARGV[t + 1], tonumber(ARGV[t + 2])
    C.zargs[#C.zargs + 1] = ARGV[t]
    C.zargs[#C.zargs + 1] = ARGV[t + 1]
  end
  for a = 1, C.na do C.names[a] = ARGV[b + 7 + 3 * C.n + a] end
  for j = 1, C.n do C.names[C.na + j] = 'p' .. C.members[j] end
  return b + 7 + 3 * C.n + C.na
end

local function count_user(key, marks, uid)
  local z = C.zargs
  if C.n > 0 then
    local found = redis.call('ZMSCORE', marks, unpack(C.names))
    local marked = false
    for k = 1, C.na + C.n do
      if found[k] then marked = true end
    end
    if marked then
      z = {}
      for j = 1, C.n do
        local mark = C.owner[j] > 0 and found[C.owner[j]]
        if not found[C.na + j] and (not mark or C.scores[j] > tonumber(mark)) then
          z[#z + 1] = C.scores[j]
          z[#z + 1] = C.members[j]
        end
      end
    end
  end
  local added = 0
  if #z > 0 then
    added = redis.call('ZADD', key, unpack(z))
    redis.call('EXPIRE', key, C.ttl)
  end
  local card = redis.call('ZCARD', key)
  if card > C.max then
    redis.call('ZREMRANGEBYRANK', key, 0, card - C.max - 1)
    card = C.max
  end
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local latest = top[2] or '0'
  if C.mode == 'p' and added > 0 then
    redis.call('PUBLISH', C.prefix .. uid, card .. ':' .. latest .. ':' .. C.now)
  end
  return added, card, latest
end
"""

# Add posts to many users' counts. KEYS: per user its count key, then its stop-marks key.
# ARGV: the head `count_args` reads (from ARGV[1]), then one user id per key pair.
# mode 'p': publish to each user whose count grew; returns publishes.
# mode 'r': publish nothing; returns a flat list count1, latest1, count2, latest2, ...
ADD = LuaScript(
    "add",
    _COUNT_LIB
    + """
local base = count_args(0)
local out, published = {}, 0
for i = 1, #KEYS / 2 do
  local key, marks = KEYS[2 * i - 1], KEYS[2 * i]
  local added, card, latest = count_user(key, marks, ARGV[base + i])
  if added > 0 then published = published + 1 end
  out[#out + 1] = card
  out[#out + 1] = latest
end
if C.mode == 'p' then return published end
return out
""",
)

# The fan-out's one call per batch (standalone servers): PUSH_MANY's insert of one post into
# the batch's timelines, then the live counts of the batch's online users, atomically, so a
# user marked online before this call is counted here and one marked after finds the post in
# the timeline (the hub's catch-up reads it after marking).
# KEYS: n timelines, the online key, then (count key, stop-marks key) of each expected user.
# ARGV: PUSH_MANY's five, n, the online cutoff ms, counting (1/0), '' (unused), then the head
# `count_args` reads (a user's id is its timeline key's, TIMELINE_ID_SPAN),
# then how many users are expected and their positions (1..n) among the timelines.
# Online users (online score >= cutoff) are counted when expected (their keys are declared)
# and counting is on; the others online are returned, for the caller to count them apart.
# Returns {timelines that gained the post, publishes, positions of online users not counted}.
_PUSH_AND_COUNT_MAIN = f"""
local ID_FROM, ID_TO = {TIMELINE_ID_SPAN[0]}, {TIMELINE_ID_SPAN[1]}
local n, cutoff, counting = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == '1'
local gained = push_keys(n)
local online = KEYS[n + 1]
-- Nobody online anywhere (a quiet hour, a benchmark): no recipient to look up.
local seen, uids = {{}}, {{}}
if redis.call('ZCARD', online) > 0 then
  for i = 1, n do uids[i] = string.sub(KEYS[i], ID_FROM, ID_TO) end
  seen = redis.call('ZMSCORE', online, unpack(uids))
end
local base = count_args(9) + 1
local slot, nexp = {{}}, tonumber(ARGV[base])
for k = 1, nexp do slot[tonumber(ARGV[base + k])] = n + 2 * k end
local published, missed = 0, {{}}
for i = 1, n do
  local ms = seen[i]
  if ms and tonumber(ms) >= cutoff then
    local at = slot[i]
    if counting and at then
      local key, marks = KEYS[at], KEYS[at + 1]
      if count_user(key, marks, uids[i]) > 0 then published = published + 1 end
    else
      missed[#missed + 1] = i
    end
  end
end
local tail_keys, tail_args = n + 1 + 2 * nexp, base + nexp
"""
PUSH_AND_COUNT = LuaScript(
    "push_and_count",
    PUSH_FRAGMENT + _COUNT_LIB + _PUSH_AND_COUNT_MAIN + "return {gained, published, missed}\n",
)


def push_and_count_with(name: str, fragment: str) -> LuaScript:
    """PUSH_AND_COUNT followed by a caller's `fragment` (a `ScriptTail`'s script): it reads
    its keys after KEYS[tail_keys] and its args after ARGV[tail_args], and leaves its answer
    in a local `tail`, returned as the reply's fourth item."""
    return LuaScript(
        name,
        PUSH_FRAGMENT
        + _COUNT_LIB
        + _PUSH_AND_COUNT_MAIN
        + fragment
        + "return {gained, published, missed, tail}\n",
    )


# Set one pair's stop mark. KEYS: stop-marks key, count key. ARGV: author, mark ms, ttl,
# prune_before ms, stop. stop = '1': set the mark and return the counted post ids; else only
# lower an existing mark (a first follow needs none). Marks older than the counts' ttl are
# pruned (STOPPED marks stay while the key lives).
STOP = LuaScript(
    "stop",
    """
if ARGV[5] == '1' then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
elseif redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[2], ARGV[1]) == 0 then
  return {}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[3])
if ARGV[5] == '1' then return redis.call('ZRANGE', KEYS[2], 0, -1) end
return {}
""",
)


def _publish_count(channel: str, now: str, key: str = "KEYS[1]") -> str:
    """Lua that publishes the count in `key` and its newest post's ms to `channel`, as
    `decode_count` reads it (`channel`, `now` and `key` are Lua expressions)."""
    return f"""
  local card = redis.call('ZCARD', {key})
  local top = redis.call('ZRANGE', {key}, -1, -1, 'WITHSCORES')
  redis.call('PUBLISH', {channel}, card .. ':' .. (top[2] or '0') .. ':' .. {now})
"""


# Forget some counted posts. KEYS: count key. ARGV: now_ms, user channel, post ids.
# Publishes the new count and the newest remaining post's ms when anything was removed.
DROP = LuaScript(
    "drop",
    f"""
local removed = redis.call('ZREM', KEYS[1], unpack(ARGV, 3))
if removed > 0 then{_publish_count("ARGV[2]", "ARGV[1]")}end
return removed
""",
)

# Forget posts that no longer reach followers, for many users. KEYS: per user its count key,
# then its stop-marks key. ARGV: now_ms, channel prefix, ttl, prune_before ms, n, n post ids,
# then per user its id and '1' to leave tombstones `p<post_id>` (score now) in its stop marks,
# else '0'. Each user whose count shrank gets the new count and the newest remaining post's
# ms. Returns how many users' counts shrank.
FORGET = LuaScript(
    "forget",
    f"""
local now, prefix, ttl, prune = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local n = tonumber(ARGV[5])
local posts, tombs = {{}}, {{}}
for j = 1, n do
  posts[j] = ARGV[5 + j]
  tombs[2 * j - 1] = now
  tombs[2 * j] = 'p' .. ARGV[5 + j]
end
local base = 5 + n
local lowered = 0
for i = 1, #KEYS / 2 do
  local key, channel = KEYS[2 * i - 1], prefix .. ARGV[base + 2 * i - 1]
  if ARGV[base + 2 * i] == '1' then
    redis.call('ZADD', KEYS[2 * i], unpack(tombs))
    redis.call('ZREMRANGEBYSCORE', KEYS[2 * i], '-inf', '(' .. prune)
    redis.call('EXPIRE', KEYS[2 * i], ttl)
  end
  if redis.call('ZREM', key, unpack(posts)) > 0 then
    lowered = lowered + 1{_publish_count("channel", "now", "key")}  end
end
return lowered
""",
)

# Reset after a fresh first page of the feed. KEYS: count key, reset key. ARGV: upto ms
# ('' = everything), reset ms, ttl, now_ms, user channel. Publishes the count when it changed.
RESET = LuaScript(
    "reset",
    f"""
local removed
if ARGV[1] == '' then
  removed = redis.call('ZCARD', KEYS[1])
  redis.call('DEL', KEYS[1])
else
  removed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
if removed > 0 then{_publish_count("ARGV[5]", "ARGV[4]")}end
return removed
""",
)

# The reset mark, set to now when missing. KEYS: reset key. ARGV: now_ms, ttl.
MARK = LuaScript(
    "mark",
    """
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return ARGV[1]
""",
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


def _user_keys(user_ids: Sequence[int]) -> list[str]:
    """Each user's count key and stop-marks key (one slot per user on a cluster)."""
    return [k for u in user_ids for k in (keys.count_key(u), stops_key(u))]


def _chunks(redis: AnyRedis, user_ids: Sequence[int]) -> list[Sequence[int]]:
    """SCRIPT_KEYS users per script call on a standalone server, one on a cluster (a
    script's keys must share a slot)."""
    size = 1 if isinstance(redis, RedisCluster) else SCRIPT_KEYS
    return [user_ids[i : i + size] for i in range(0, len(user_ids), size)]


async def _eval_users(
    redis: AnyRedis, script: LuaScript, user_ids: Sequence[int], head: Sequence[Any]
) -> list[Any]:
    """ADD over many users, in `_chunks`, all calls pipelined."""
    calls = [(_user_keys(ids), [*head, *ids]) for ids in _chunks(redis, user_ids)]
    return await run_script_many(redis, script, calls)


def _head(
    redis: AnyRedis,
    entries: Sequence[Entry],
    mode: str,
    settings: Settings,
    author_id: int | None = None,
) -> list[Any]:
    """The ADD script's arguments before the user ids. An entry's author is its third item,
    else `author_id`; with neither, the post is counted whatever the marks."""
    authors: dict[int, int] = {}  # author id -> its 1-based index in the script's list
    flat: list[Any] = []
    for entry in entries:
        author = int(entry[2]) if len(entry) > 2 else author_id
        index = 0 if author is None else authors.setdefault(int(author), len(authors) + 1)
        flat += [int(entry[1]), int(entry[0]), index]
    prefix = keys.Channels.for_redis(redis, settings.realtime_namespace).user_prefix
    ttl, max_ = settings.realtime_count_ttl_seconds, settings.realtime_count_max
    return [ttl, max_, now_ms(), mode, prefix, len(entries), len(authors), *flat, *authors]


async def add_and_publish(
    redis: AnyRedis,
    user_ids: Sequence[int],
    entries: Sequence[Entry],
    settings: Settings,
    *,
    author_id: int | None = None,
) -> int:
    """Count pushed posts for these users and publish each user's new count (workers).

    One script call per SCRIPT_KEYS users. A user whose count did not grow (a replayed
    batch, only posts of an author the user stopped following or is blocked with, or of
    posts deleted since) is not notified. Returns the number of notifications published.
    """
    if not user_ids or not entries:
        return 0
    online = await online_users(redis, user_ids, settings)
    if not online:
        return 0
    head = _head(redis, entries, "p", settings, author_id)
    published = sum(int(r) for r in await _eval_users(redis, ADD, online, head))
    PUBLISHED.labels("user").inc(published)
    return published


async def online_users(redis: AnyRedis, user_ids: Sequence[int], settings: Settings) -> list[int]:
    """The users a hub held a socket for within the grace period (one ZMSCORE)."""
    key = keys.Channels.for_redis(redis, settings.realtime_namespace).online_key
    seen = await redis.execute_command("ZMSCORE", key, *user_ids)
    cutoff = now_ms() - settings.realtime_online_grace_seconds * 1000
    return [
        u for u, ms in zip(user_ids, seen, strict=True) if ms is not None and float(ms) >= cutoff
    ]


async def mark_online(redis: AnyRedis, user_ids: Sequence[int], settings: Settings) -> None:
    """Hubs call this for their connected users on subscribe and periodically after."""
    if not user_ids:
        return
    key = keys.Channels.for_redis(redis, settings.realtime_namespace).online_key
    now = now_ms()
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zadd(key, {str(u): now for u in user_ids})
        pipe.zremrangebyscore(key, "-inf", now - settings.realtime_online_grace_seconds * 1000)
        await pipe.execute()


async def add_for_users(
    redis: AnyRedis,
    user_ids: Sequence[int],
    entries: Sequence[Entry],
    settings: Settings,
    *,
    author_id: int | None = None,
    published_ms: float = 0.0,
) -> dict[int, FeedCount]:
    """Count posts for these users without publishing; their current counts (API hubs).

    With no entries this only reads. Used for pull-mode posts delivered by each API process
    to its own sockets, and for the catch-up when a subscriber connects. Posts whose author
    is known (`author_id`, or a third item in the entry) honour the pairs' stop marks.
    """
    if not user_ids:
        return {}
    ids = list(user_ids)
    head = _head(redis, entries, "r", settings, author_id)
    replies = await _eval_users(redis, ADD, ids, head)
    flat = [x for reply in replies for x in reply]
    out: dict[int, FeedCount] = {}
    for i, user_id in enumerate(ids):
        latest = int(float(flat[2 * i + 1]))
        out[user_id] = FeedCount(int(flat[2 * i]), latest or None, published_ms)
    return out


async def reset_marks(
    redis: AnyRedis, user_ids: Sequence[int], settings: Settings
) -> dict[int, int]:
    """When each user's count was last reset (ms), set to now on first use: one pipeline for
    many users (a hub admitting a burst of sockets)."""
    ids = list(dict.fromkeys(user_ids))
    now, ttl = now_ms(), settings.realtime_count_ttl_seconds
    calls = [([keys.reset_key(u)], [now, ttl]) for u in ids]
    replies = await run_script_many(redis, MARK, calls)
    return {u: int(r) for u, r in zip(ids, replies, strict=True)}


async def add_each(
    redis: AnyRedis,
    entries_by_user: dict[int, Sequence[Entry]],
    settings: Settings,
) -> dict[int, FeedCount]:
    """`add_for_users` with each user's own entries (a catch-up per subscriber), in one
    pipeline; users with the same entries (most often none) share a script call."""
    groups: dict[tuple[tuple[int, ...], ...], list[int]] = {}
    for user_id, entries in entries_by_user.items():
        groups.setdefault(tuple(tuple(int(x) for x in e) for e in entries), []).append(user_id)
    out: dict[int, FeedCount] = {}
    for entries_key, users in groups.items():
        out.update(await add_for_users(redis, users, list(entries_key), settings))
    return out


async def reset_new_post_count(
    redis: AnyRedis, settings: Settings, user_id: int, *, seen_upto_ms: int | None = None
) -> None:
    """The viewer read a fresh first page of `feed`: their new-post count starts again at 0.

    `seen_upto_ms` (optional): only posts created at or before it are forgotten, so a post
    fanned out while the page was being built still counts. Connected sockets of the user,
    on any API process, get the new count at once.
    """
    now = now_ms()
    mark = now if seen_upto_ms is None else min(now, int(seen_upto_ms))
    upto = "" if seen_upto_ms is None else str(int(seen_upto_ms))
    channel = keys.Channels.for_redis(redis, settings.realtime_namespace).user(user_id)
    args = [upto, mark, settings.realtime_count_ttl_seconds, now, channel]
    removed = await run_script(
        redis, RESET, [keys.count_key(user_id), keys.reset_key(user_id)], args
    )
    if int(removed):
        PUBLISHED.labels("reset").inc()


async def stop_counting(
    redis: AnyRedis,
    pairs: Sequence[tuple[int, int]],
    authors_of: Callable[[list[int]], Awaitable[Mapping[int, int]]],
    settings: Settings,
) -> int:
    """(user, author) pairs that were just cut (unfollow, block): from now on none of the
    author's posts is counted for the user, and those counted already are removed. Each
    user whose count changed gets the new count, latest = the newest post left (or none).

    Run after the graph change committed. First every pair is marked (one script per user),
    so a fan-out batch that arrives later, queued before the change, counts nothing; then the
    counted posts are looked up once (`authors_of`: post ids -> author ids, SQL) and the
    pair's are dropped (one script per user). Idempotent. Returns the posts removed.
    """
    counted: dict[int, list[int]] = {}
    for user_id, author_id in pairs:
        ids = await _stop(redis, user_id, author_id, STOPPED, settings, stop=True)
        if ids:
            counted[user_id] = ids
    if not counted:
        return 0
    owners = await authors_of(sorted({p for ids in counted.values() for p in ids}))
    channels = keys.Channels.for_redis(redis, settings.realtime_namespace)
    removed = 0
    for user_id, ids in counted.items():
        cut = {a for u, a in pairs if u == user_id}
        doomed = [p for p in ids if owners.get(p) in cut]
        if not doomed:
            continue
        args = [now_ms(), channels.user(user_id), *doomed]
        gone = int(await run_script(redis, DROP, [keys.count_key(user_id)], args))
        if gone:
            removed += gone
            PUBLISHED.labels("reset").inc()
    return removed


async def forget_posts(
    redis: AnyRedis,
    user_ids: Sequence[int],
    post_ids: Sequence[int],
    settings: Settings,
    *,
    final: bool,
) -> int:
    """These posts stopped reaching these users (deleted, or made PRIVATE): remove them
    from the users' counts and announce each count that shrank, with the newest remaining
    post's time (or none). Where a post was not counted nothing changes, so a retried or
    replayed job lowers nothing twice. Returns the number of users whose count shrank.

    `final` (a delete, which is never undone): online users also get a tombstone per post, so
    a raise already under way (a fan-out batch or a pull-mode delivery that read the post
    alive just before the delete) counts nothing once this ran. Offline users need none:
    counts are raised only for online users, and every raise checks the post in SQL first.
    A narrowing leaves no tombstone, as widening again must let the post count."""
    if not user_ids or not post_ids:
        return 0
    ids = list(user_ids)
    online = set(await online_users(redis, ids, settings)) if final else set()
    prefix = keys.Channels.for_redis(redis, settings.realtime_namespace).user_prefix
    ttl = settings.realtime_count_ttl_seconds
    now = now_ms()
    head = [now, prefix, ttl, now - ttl * 1000, len(post_ids), *(int(p) for p in post_ids)]
    calls = [
        (_user_keys(chunk), [*head, *(x for u in chunk for x in (u, int(u in online)))])
        for chunk in _chunks(redis, ids)
    ]
    lowered = sum(int(r) for r in await run_script_many(redis, FORGET, calls))
    PUBLISHED.labels("reset").inc(lowered)
    return lowered


async def resume_counting(
    redis: AnyRedis,
    user_id: int,
    author_id: int,
    since_ms: int,
    settings: Settings,
) -> None:
    """The user (re)followed the author: the author's posts created after `since_ms` count
    again. Older ones stay uncounted, so a refollow (or unblock + follow) brings back no count,
    and a fan-out batch of an old post that lagged behind announces nothing either. Only a
    pair stopped before has a mark to lower: a first follow writes nothing."""
    await _stop(redis, user_id, author_id, int(since_ms), settings, stop=False)


async def _stop(
    redis: AnyRedis,
    user_id: int,
    author_id: int,
    mark: int,
    settings: Settings,
    *,
    stop: bool,
) -> list[int]:
    ttl = settings.realtime_count_ttl_seconds
    args = [int(author_id), mark, ttl, now_ms() - ttl * 1000, "1" if stop else "0"]
    ids = await run_script(redis, STOP, [stops_key(user_id), keys.count_key(user_id)], args)
    return [int(p) for p in ids]


class OnlineUsers:
    """A worker's recent copy of the online set (`fu:<ns>:online`), refreshed at most every
    `refresh_seconds`: which recipients of a batch to declare count keys for in the
    PUSH_AND_COUNT call. Only a guess: the script checks every recipient against the online
    key itself, and a user online but not guessed (connected since the refresh) comes back to
    be counted apart, so a stale copy costs a round trip, never a count."""

    def __init__(self, refresh_seconds: float = ONLINE_REFRESH_SECONDS) -> None:
        self.refresh_seconds = refresh_seconds
        self._users: frozenset[int] = frozenset()
        self._fetched = -math.inf
        self._lock = asyncio.Lock()

    async def guess(self, redis: AnyRedis, settings: Settings) -> frozenset[int]:
        if time.monotonic() - self._fetched < self.refresh_seconds:
            return self._users
        async with self._lock:
            if time.monotonic() - self._fetched >= self.refresh_seconds:
                key = keys.Channels.for_redis(redis, settings.realtime_namespace).online_key
                cutoff = now_ms() - settings.realtime_online_grace_seconds * 1000
                found = await redis.zrangebyscore(key, cutoff, "+inf")
                self._users = frozenset(int(u) for u in found)
                self._fetched = time.monotonic()
        return self._users


@dataclass(frozen=True, slots=True)
class PushCounted:
    """What one PUSH_AND_COUNT call did."""

    gained: int  # timelines that gained the post
    published: int  # users whose count grew (notified)
    missed: list[int]  # online users it did not count (not guessed, or counting off)


def can_push_and_count(store: TimelineStore, redis: AnyRedis) -> bool:
    """The fused call needs the timelines and the counts on one standalone server (a cluster
    spreads a batch's keys and the online key over slots)."""
    return store.redis is redis and not isinstance(redis, RedisCluster)


async def push_and_count(
    store: TimelineStore,
    post_id: int,
    score_ms: int,
    user_ids: Sequence[int],
    guessed: Sequence[int],
    settings: Settings,
    *,
    author_id: int,
    counting: bool,
    tail: ScriptTail | None = None,
) -> PushCounted:
    """One post into the batch's timelines and into the live counts of its online users, in
    one EVALSHA (PUSH_AND_COUNT). `guessed`: the users whose count keys are declared (those
    `OnlineUsers` believes online); `counting` off (the post no longer reaches followers):
    nobody is counted, the online ones are only reported. `tail`: a caller's work done in
    the same call (`push_and_count_with`; the fan-out's job tracking)."""
    redis = store.redis
    ids = [int(u) for u in user_ids]
    position = {u: i for i, u in enumerate(ids, 1)}
    mine = [u for u in dict.fromkeys(int(g) for g in guessed) if u in position] if counting else []
    channels = keys.Channels.for_redis(redis, settings.realtime_namespace)
    keys_ = [
        *timeline_keys(ids),
        channels.online_key,
        *_user_keys(mine),
    ]
    cutoff = now_ms() - int(settings.realtime_online_grace_seconds * 1000)
    head = _head(redis, [(post_id, score_ms)], "p", settings, author_id)
    args = [
        *store.push_args(post_id, score_ms),
        len(ids),
        cutoff,
        1 if counting else 0,
        "",  # (was the ids packed; the script reads them from the timeline keys)
        *head,
        len(mine),
        *(position[u] for u in mine),
    ]
    script = PUSH_AND_COUNT
    if tail is not None:
        script = tail.script
        keys_ += tail.keys
        args += tail.args
    reply = await run_script(redis, script, keys_, args)
    gained, published, missed = reply[:3]
    if tail is not None:
        tail.reply = reply[3]
    if published:
        PUBLISHED.labels("user").inc(int(published))
    return PushCounted(int(gained), int(published), [ids[int(i) - 1] for i in missed])
