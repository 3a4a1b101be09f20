"""Per-post fan-out completion, so the reconciler can tell a finished fan-out from one
whose jobs were lost.

A post's fan-out is a tree of jobs: the split (`fanout_post`), its FanoutBatch jobs and its
continuations. `fp:<post_id>` holds the ids of the jobs still owed: a job adds the jobs it
queues *before* queuing them and removes itself when it succeeds, and the split is a member
while it runs, so the set is empty only once the whole tree succeeded; the job that empties
it marks `fo:<post_id>` done. A job that failed for good stays a member (it is a dead letter).

The same step counts how far the post has become visible (decision 0023): a planning job
(the split, a continuation) adds the active followers it paged into the post's batches, a
batch adds the followers it wrote, and whoever first sees a batch written observes
`feed_post_first_visible_seconds`, whoever first sees 95% of a complete plan written
`feed_post_visible_95_seconds`. Gated by the job's removal from `fp:`, each job counts once
(retries, replays and a re-queued finished job count nothing); the marks `first` and `p95`
are set once per post, so each metric is observed once per post whatever runs again.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from arq.constants import in_progress_key_prefix, job_key_prefix
from redis.asyncio import Redis

from app.fanout import lanes
from app.observability.metrics import POST_FIRST_VISIBLE, POST_VISIBLE_95
from app.posts.ids import created_ms
from app.redis_scripts import LuaScript, run_script
from app.timelines.tails import Tail, TailProgram
from jobs import constants

FIRST, P95 = "first", "p95"  # ms the post was first / 95% visible (set once)
# What one run of the fan-out has counted so far; a re-run by the reconciler starts afresh.
_PROGRESS_FIELDS = ("planned", "written", "split", "open")
_CHUNK_PREFIX = "chunk-"
for _lane in (*lanes.LANES, lanes.PULL_LABEL):  # exported from the start, at 0
    POST_FIRST_VISIBLE.labels(_lane)
    POST_VISIBLE_95.labels(_lane)


def pending_key(post_id: int) -> str:
    """set: ids of the jobs of the post's fan-out not yet succeeded."""
    return f"fp:{post_id}"


def state_key(post_id: int) -> str:
    """hash: `done` (ms), `attempts` (reconciler re-runs), `gave_up` (ms); visibility:
    `planned`, `written` (followers), `split`, `open`, `chunk-<cursor>` (the plan's chunks),
    `first`, `p95` (ms)."""
    return f"fo:{post_id}"


async def owe(redis: Redis, post_id: int, job_ids: Iterable[str], *, ttl: int) -> None:
    """These jobs belong to the post's fan-out and have not succeeded yet."""
    key = pending_key(post_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.sadd(key, *job_ids)
        pipe.expire(key, ttl)
        await pipe.execute()


@dataclass(frozen=True)
class Progress:
    """What a job of a post's fan-out adds to the post's visibility when it succeeds."""

    planned: int = 0  # active followers a planning job paged into the post's batches
    written: int = 0  # followers whose timelines a batch wrote the post into
    chunk: int | None = None  # a planning job's own cursor: 0 the split, else its `after`
    continues_after: int | None = None  # the continuation a planning job queued, if any


# KEYS: fp:<post>, fo:<post>. ARGV: job id, now ms, ttl s, planned, written, chunk cursor
# ('' when not a planning job), continuation cursor (''), share in percent.
# A continuation is reported by the job that queued it and by itself when it succeeds, in
# either order: `chunk-<cursor>` is toggled by both, `open` counts the ones seen once, so the plan
# is complete when the split has reported (`split`) and `open` is 0.
# Returns {counted, done, first, p95}: 1 where this call did it (p95: the ms it recorded).
# One server: ARQ's Redis (ARQ needs a standalone server, so the two keys need no common hash
# tag).
_PROGRESS_FN = """
local function progress(pending, state, a)
  if redis.call('SREM', pending, ARGV[a + 1]) == 0 then return {0, 0, 0, 0} end
  local now, planned, written = ARGV[a + 2], tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local function toggle(cursor)
    local field = 'chunk-' .. cursor
    if redis.call('HDEL', state, field) == 1 then
      redis.call('HINCRBY', state, 'open', -1)
    else
      redis.call('HSET', state, field, 1)
      redis.call('HINCRBY', state, 'open', 1)
    end
  end
  if ARGV[a + 6] ~= '' then
    if ARGV[a + 6] == '0' then redis.call('HSET', state, 'split', 1) else toggle(ARGV[a + 6]) end
    if ARGV[a + 7] ~= '' then toggle(ARGV[a + 7]) end
    if planned > 0 then redis.call('HINCRBY', state, 'planned', planned) end
  end
  local first, p95 = 0, 0
  if written > 0 then
    redis.call('HINCRBY', state, 'written', written)
    first = redis.call('HSETNX', state, 'first', now)
  end
  local f = redis.call('HMGET', state, 'split', 'open', 'planned', 'written')
  local plan, total = tonumber(f[3] or 0), tonumber(f[4] or 0)
  local share = tonumber(ARGV[a + 8])
  if f[1] and tonumber(f[2] or 0) == 0 and plan > 0 and total * 100 >= plan * share then
    -- Never before `first`: batches take `now` before their calls, which may land in
    -- either order.
    local stamp, seen = now, redis.call('HGET', state, 'first')
    if seen and tonumber(seen) > tonumber(now) then stamp = seen end
    if redis.call('HSETNX', state, 'p95', stamp) == 1 then p95 = tonumber(stamp) end
  end
  local done = 0
  if redis.call('SCARD', pending) == 0 then
    redis.call('HSET', state, 'done', now)
    done = 1
  end
  redis.call('EXPIRE', state, ARGV[a + 3])
  return {1, done, first, p95}
end
"""
_PROGRESS = LuaScript(
    "fanout_progress",
    _PROGRESS_FN
    + """
local pending, state = KEYS[1], KEYS[2]
return progress(pending, state, 0)
""",
)
# The progress step as a tail of a post's own FanoutBatch page's timeline write, on one
# server (ARQ's and the timelines', decision 0049): the insert, its live counts and this step
# in one call (`app.timelines.tails`, decision 0070). Keys: fp:<post>, fo:<post>; args: as
# _PROGRESS's. Answers as _PROGRESS.
PROGRESS_TAIL = TailProgram(
    "fanout_progress",
    """
local pending, state = KEYS[k + 1], KEYS[k + 2]
return progress(pending, state, a)
""",
    prelude=_PROGRESS_FN,
)


def _progress_args(job_id: str, now_ms: int, ttl: int, progress: Progress) -> list[str | int]:
    return [
        job_id,
        now_ms,
        ttl,
        progress.planned,
        progress.written,
        "" if progress.chunk is None else progress.chunk,
        "" if progress.continues_after is None else progress.continues_after,
        constants.VISIBLE_SHARE_PERCENT,
    ]


def settle_tail(post_id: int, job_id: str, progress: Progress, *, ttl: int) -> Tail:
    """`settle` as a batch's insert call's tail (PROGRESS_TAIL): one round trip for the
    insert, the counts and this step, atomic, so a batch whose insert fails is still owed.
    Only for a server that holds both ARQ's keys and the timelines; `settled` reads the
    answer (the reply stays None when the insert went another way: `settle` then)."""
    args = _progress_args(job_id, int(time.time() * 1000), ttl, progress)
    return Tail(PROGRESS_TAIL, [pending_key(post_id), state_key(post_id)], args)


def settled(post_id: int, tail: Tail, lane: str) -> bool:
    """What `settle` returns, from a tail's answer; observes the visibility metrics."""
    _, done, first, p95 = tail.reply
    _observe(post_id, int(tail.args[1]), lanes.label(lane), bool(first), p95)
    return bool(done)


async def settle(
    redis: Redis,
    post_id: int,
    job_id: str,
    progress: Progress = Progress(),
    lane: str = lanes.DEFAULT,
    *,
    ttl: int,
) -> bool:
    """The job succeeded; True when that completed the post's fan-out. Observes the post's
    first and 95% visibility (in `lane`, a queue name) when this job's progress reached them."""
    now_ms = int(time.time() * 1000)
    args = _progress_args(job_id, now_ms, ttl, progress)
    keys = [pending_key(post_id), state_key(post_id)]
    _, done, first, p95 = await run_script(redis, _PROGRESS, keys, args)
    _observe(post_id, now_ms, lanes.label(lane), bool(first), p95)
    return bool(done)


async def _mark_now(redis: Redis, post_id: int, fields: tuple[str, ...], ttl: int) -> list[int]:
    """Stamp `fields` of the post's state with now (HSETNX: the first stamp stays): now in
    ms, and for each field that stamp if this call set it, else 0."""
    now_ms = int(time.time() * 1000)
    key = state_key(post_id)
    async with redis.pipeline(transaction=True) as pipe:
        for field in fields:
            pipe.hsetnx(key, field, str(now_ms))
        pipe.expire(key, ttl)
        *set_, _ = await pipe.execute()
    return [now_ms, *(now_ms if was_set else 0 for was_set in set_)]


async def first_visible(redis: Redis, post_id: int, lane: str, *, ttl: int) -> bool:
    """A planning job wrote its post's first page itself (decision 0064): the post is first
    visible now, not when the job settles (its last page, ~100 ms later for 50,000
    followers). Observed once per post (the mark); counts no progress, so retries and the
    job's own settle add nothing. True when this call set the mark."""
    now_ms, first = await _mark_now(redis, post_id, (FIRST,), ttl)
    _observe(post_id, now_ms, lanes.label(lane), bool(first), 0)
    return bool(first)


async def visible_at_once(redis: Redis, post_id: int, *, ttl: int) -> None:
    """A PULL author's post: every follower reads it from posts:{author} from now on, so it
    is first and 95% visible at once (lane label "pull"), observed once per post."""
    now_ms, first, p95 = await _mark_now(redis, post_id, (FIRST, P95), ttl)
    _observe(post_id, now_ms, lanes.PULL_LABEL, bool(first), p95)


def _observe(post_id: int, now_ms: int, label: str, first: bool, p95_ms: int) -> None:
    """`first` observed at `now_ms`; 95% at `p95_ms` (0: not this call's), the stamp the
    progress step recorded (never before the post's first)."""
    created = created_ms(post_id)
    if first:
        POST_FIRST_VISIBLE.labels(label).observe(max(0.0, (now_ms - created) / 1000))
    if p95_ms:
        POST_VISIBLE_95.labels(label).observe(max(0.0, (int(p95_ms) - created) / 1000))


async def alive(redis: Redis, post_id: int, also: Iterable[str] = ()) -> bool:
    """Is any job still owed by the post's fan-out (or in `also`) queued, waiting for a
    retry or running? ARQ keeps a job's key until it finishes, whatever its lane."""
    members = await redis.smembers(pending_key(post_id))
    ids = [*(m.decode() if isinstance(m, bytes) else m for m in members), *also]
    if not ids:
        return False
    keys = [job_key_prefix + i for i in ids] + [in_progress_key_prefix + i for i in ids]
    return int(await redis.exists(*keys)) > 0


async def restart(redis: Redis, post_id: int, job_id: str, *, ttl: int) -> None:
    """The fan-out runs again as `job_id`: forget what the lost run owed and counted (not
    the visibility marks: those are observed once per post)."""
    key = pending_key(post_id)
    fields = await redis.hkeys(state_key(post_id))
    names = [f.decode() if isinstance(f, bytes) else f for f in fields]
    counted = [f for f in names if f in _PROGRESS_FIELDS or f.startswith(_CHUNK_PREFIX)]
    async with redis.pipeline(transaction=True) as pipe:
        pipe.delete(key)
        pipe.sadd(key, job_id)
        pipe.expire(key, ttl)
        if counted:
            pipe.hdel(state_key(post_id), *counted)
        await pipe.execute()
