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

Why a mute keeps its pair stopped (decision 0076): the muter still follows the author, so the
fan-out keeps bringing the author's posts, counted against the stop marks alone. A mute
stops the pair as an unfollow does (`stop_counting`); since the marks live as long as the
user's stop-marks key (the counts' ttl), hubs plant every mute of a user again when it
connects and on each refresh (`plant_stops`, NX: never over a mark lowered since), and the
hub's SQL checks (a pull-mode post, a connect's catch-up) read the mutes themselves. A hidden
post leaves the viewer's count with a tombstone (`forget_for_user`), as a deleted one does.

Why a delete leaves the counts on its own too: a deleted (or newly PRIVATE) post must not stay
"new" until the next first page. `forget_posts` (run by the post-change job) removes it from
every follower's count (ZREM: only where it was counted, never twice) and announces the lower
count; for a delete it also leaves a tombstone `p<post_id>` in the stop-marks key of each
online follower, so a fan-out batch or pull-mode delivery already past its own SQL check
cannot count the post again after it was removed.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster

from app.config import Settings
from app.realtime import constants, keys
from app.realtime.count_scripts import ADD, DROP, FORGET, MARK, PLANT, RESET, STOP
from app.realtime.keys import stops_key
from app.realtime.metrics import PUBLISHED
from app.redis_scripts import AnyRedis, LuaScript, run_script, run_script_many

Entry = Sequence[int]
"""(post_id, created_at_ms), as fan-out batches carry them, or (post_id, created_at_ms,
author_id): with the author known, the pair's stop mark applies (see `stop_counting`)."""

# Stop mark of a pair while it is cut (unfollowed or blocked): above every post's ms, so none
# of the author's posts counts; exact as a double, so Lua compares it exactly.
STOPPED = 2**53 - 1


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


def user_keys(user_ids: Sequence[int]) -> list[str]:
    """Each user's count key and stop-marks key (one slot per user on a cluster)."""
    return [k for u in user_ids for k in (keys.count_key(u), stops_key(u))]


def _chunks(redis: AnyRedis, user_ids: Sequence[int]) -> list[Sequence[int]]:
    """SCRIPT_KEYS users per script call on a standalone server, one on a cluster (a
    script's keys must share a slot)."""
    size = 1 if isinstance(redis, RedisCluster) else constants.SCRIPT_KEYS
    return [user_ids[i : i + size] for i in range(0, len(user_ids), size)]


async def _eval_users(
    redis: AnyRedis, script: LuaScript, user_ids: Sequence[int], head: Sequence[Any]
) -> list[Any]:
    """ADD over many users, in `_chunks`, all calls pipelined."""
    calls = [(user_keys(ids), [*head, *ids]) for ids in _chunks(redis, user_ids)]
    return await run_script_many(redis, script, calls)


def count_head(
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
    head = count_head(redis, entries, "p", settings, author_id)
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
    head = count_head(redis, entries, "r", settings, author_id)
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
        (user_keys(chunk), [*head, *(x for u in chunk for x in (u, int(u in online)))])
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


async def forget_for_user(
    redis: AnyRedis, user_id: int, post_ids: Sequence[int], settings: Settings
) -> bool:
    """The user hid these posts: out of their count now (announced when it shrank), and a
    tombstone each, online or not, so no raise already under way counts them again (the
    hub's SQL checks read the hides themselves). Whether the count shrank."""
    if not post_ids:
        return False
    prefix = keys.Channels.for_redis(redis, settings.realtime_namespace).user_prefix
    ttl = settings.realtime_count_ttl_seconds
    now = now_ms()
    args = [now, prefix, ttl, now - ttl * 1000, len(post_ids), *(int(p) for p in post_ids)]
    lowered = int(await run_script(redis, FORGET, user_keys([user_id]), [*args, user_id, 1]))
    PUBLISHED.labels("reset").inc(lowered)
    return bool(lowered)


async def plant_stops(
    redis: AnyRedis, authors_by_user: Mapping[int, Sequence[int]], settings: Settings
) -> None:
    """Each user's pairs with these authors (their mutes) stopped, where no mark is set: one
    script per user, pipelined. Run by hubs for the users they serve (see the module doc)."""
    ttl = settings.realtime_count_ttl_seconds
    calls = [
        ([stops_key(u)], [STOPPED, ttl, *(int(a) for a in authors)])
        for u, authors in authors_by_user.items()
        if authors
    ]
    if calls:
        await run_script_many(redis, PLANT, calls)
