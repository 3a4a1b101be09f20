"""Narrowing watermarks: the primary's WAL position after each commit that narrows what some
viewer may see, kept in Redis where a feed page finds it in one round trip, so a replica
answers the page only once it has replayed every such commit that concerns it
(docs/decisions/0086-replica-watermarks.md).

Who calls what:
- every authorization-narrowing write, right after its commit: `record_narrowing(marks,
  viewers=..., authors=...)`. `viewers`: the users whose own view narrowed (a block: both
  users; an unfollow, a hide, a mute: the viewer); `authors`: the users whose posts
  narrowed for everybody (a delete, a visibility narrowing, a regional restriction). The
  viewer's own writes (post, edit, like, follow) mark the viewer (read-your-writes) and an
  edit or a profile change its author (pages never show an older body or name);
- the feed's page filter (app.feed.filter): `concern(viewer, authors)` after a replica read,
  the highest mark among the viewer's and the shown rows' authors, or None: unknown.

Bounded: each mark lives DATABASE_REPLICA_WATERMARK_TTL_SECONDS, longer than the router's
MAX_LAG + CHECK (checked at start-up), so a mark that expired concerns a commit every replica
in use has replayed anyway (the lag bound proves it).

Fail closed. Marks that cannot be read (Redis down, a timeout) or may have been lost (the
role flushed or restarted empty) answer "unknown" and the page goes to the primary. Loss is
seen through an epoch key written once and never expiring: missing, the reader sets it again
together with a warm-up key that lives one mark TTL, and marks count as known only once the
warm-up key is gone, by when every mark the loss took would have expired anyway. A mark that
cannot be written deletes the epoch instead (every reader then waits out a TTL on the
primary); the mark's LSN, if the primary cannot tell it, is the highest possible one. All keys
share the hash tag `{wm}`: one slot, so a page's read is one MGET on a cluster too (one node
holds every mark; see the decision's "What would change it").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from prometheus_client import Counter
from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.redis_scripts import AnyRedis, LuaScript, run_script

log = logging.getLogger(__name__)

# One slot for every mark (hash tag {wm}): the epoch, the warm-up key and the marks.
EPOCH_KEY = "wm:{wm}:epoch"
WARM_KEY = "wm:{wm}:warm"


def viewer_key(user_id: int) -> str:
    """The mark of narrowings of `user_id`'s own view (blocks, unfollows, hides, mutes)."""
    return f"wm:{{wm}}:v:{user_id}"


def author_key(user_id: int) -> str:
    """The mark of narrowings of `user_id`'s posts for everyone (deletes, visibility)."""
    return f"wm:{{wm}}:a:{user_id}"


# Never lower a mark (a slower writer's older LSN after a newer one); always renew its TTL.
# KEYS: the marks; ARGV: lsn, ttl ms.
_RECORD = LuaScript(
    "watermark_record",
    """
local lsn = tonumber(ARGV[1])
for _, key in ipairs(KEYS) do
    local cur = tonumber(redis.call('GET', key) or '0')
    if cur < lsn then cur = lsn end
    redis.call('SET', key, string.format('%.0f', cur), 'PX', ARGV[2])
end
return 1
""",
)

# The epoch is missing (role flushed, a fresh server): set it with a warm-up key of one TTL.
# KEYS: epoch, warm; ARGV: ttl ms.
_ARM = LuaScript(
    "watermark_arm",
    """
if redis.call('SET', KEYS[1], '1', 'NX') then
    redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
end
return 1
""",
)

# After the commit, the position of the WAL's end: the commit record is at or before it
# (the insert position: with synchronous_commit=off the record may not be written yet).
_LSN = "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint"
UNKNOWN_LSN = 2**62  # the primary could not tell: no replica passes it within the TTL

WATERMARKS = Counter(
    "feed_db_watermarks_total",
    "Narrowing watermarks by outcome: recorded; lsn_unknown (the primary did not answer, the "
    "highest mark recorded); lost (Redis refused the mark: the epoch was reset); unrecorded "
    "(Redis refused the epoch's reset too)",
    ["outcome"],
)


class Watermarks:
    """Narrowing marks in one Redis role (the sessions role), LSNs read on the primary."""

    def __init__(self, redis: AnyRedis, primary: AsyncEngine, ttl_seconds: float) -> None:
        self.redis = redis
        self.primary = primary.execution_options(isolation_level="AUTOCOMMIT")
        self.ttl_ms = max(1, int(ttl_seconds * 1000))

    async def record(self, viewers: Iterable[int] = (), authors: Iterable[int] = ()) -> None:
        """Mark `viewers` and `authors` at the primary's WAL position now (see module doc).
        Never raises: a mark it cannot write resets the epoch (fail closed)."""
        keys = sorted({viewer_key(v) for v in viewers} | {author_key(a) for a in authors})
        if not keys:
            return
        try:
            async with self.primary.connect() as conn:
                lsn = int((await conn.exec_driver_sql(_LSN)).scalar_one())
        except Exception:  # the primary went away after the commit: the highest mark
            log.warning("the primary's WAL position is unknown after a narrowing", exc_info=True)
            WATERMARKS.labels("lsn_unknown").inc()
            lsn = UNKNOWN_LSN
        try:
            await run_script(self.redis, _RECORD, keys, [lsn, self.ttl_ms])
        except (RedisError, OSError, TimeoutError):
            log.warning("watermark not recorded: resetting the epoch", exc_info=True)
            try:
                await self.redis.delete(EPOCH_KEY)
            except (RedisError, OSError, TimeoutError):
                WATERMARKS.labels("unrecorded").inc()
                return
            WATERMARKS.labels("lost").inc()
            return
        WATERMARKS.labels("recorded").inc()

    async def concern(self, viewer_id: int, authors: Iterable[int]) -> int | None:
        """The highest mark concerning a page of `viewer_id` showing `authors`' posts (0:
        none), or None when the marks are unknown (unreadable, or possibly lost)."""
        keys = [EPOCH_KEY, WARM_KEY, viewer_key(viewer_id), *map(author_key, authors)]
        try:
            found = await self.redis.mget(keys)
            if found[0] is None:
                await run_script(self.redis, _ARM, [EPOCH_KEY, WARM_KEY], [self.ttl_ms])
                return None
        except (RedisError, OSError, TimeoutError):
            return None
        if found[1] is not None:
            return None  # warming up after a loss
        return max((int(v) for v in found[2:] if v is not None), default=0)

    async def clear(self) -> None:
        """Tests, on fresh tables: forget every mark and trust the (empty) marks at once."""
        keys = [k async for k in self.redis.scan_iter(match="wm:{wm}:[va]:*", count=1000)]
        await self.redis.delete(WARM_KEY, *keys)
        await self.redis.set(EPOCH_KEY, "1")


async def record_narrowing(
    marks: Watermarks | None, *, viewers: Iterable[int] = (), authors: Iterable[int] = ()
) -> None:
    """After a committed write that narrows what someone may see (or a viewer's own write):
    mark `viewers` (whose own view narrowed: both users of a block; the viewer of an
    unfollow, hide, mute, or of their own write) and `authors` (whose posts narrowed for
    everyone: delete, visibility narrowing, regional restriction; an edit). `marks` None (no
    replica configured): nothing to do. Never raises (see `Watermarks.record`)."""
    if marks is not None:
        await marks.record(viewers, authors)
