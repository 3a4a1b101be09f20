"""Impressions: which posts a viewer was served (every feed page) or reported seen
(`reportImpressions`), kept so that RANKED can put posts already seen behind unseen ones.

Off the request path: `record` only adds ids to an in-process buffer; a flush, scheduled
IMPRESSIONS_FLUSH_SECONDS (app.feed.constants) after the first id of a batch (sooner when
IMPRESSIONS_MAX_PENDING ids wait), writes every buffered viewer in one pipelined round trip
(one script call per viewer). Bounded: one zset per viewer, `imp:{viewer}` (member = post
id, score = ms of the latest impression), never over its newest `IMPRESSIONS_MAX` members,
expiring `IMPRESSIONS_TTL_SECONDS` after its last write (docs/decisions/0010-impressions.md
has the figures).

Best effort by design: a failed flush drops its batch (counted), a failed read means no
demotion, and a process that stops loses at most IMPRESSIONS_FLUSH_SECONDS of impressions.
A ranking that misses a few impressions shows a seen post early once; it never fails a page.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any, cast

from prometheus_client import Counter
from redis.exceptions import RedisError

from app.background_flush import BackgroundFlush
from app.feed.constants import (
    IMPRESSIONS_FLUSH_SECONDS,
    IMPRESSIONS_MAX_PENDING,
    IMPRESSIONS_MAX_PER_VIEWER_BATCH,
    MAX_REPORTED,
)
from app.posts.ids import parse_reported_ids
from app.redis_scripts import AnyRedis, LuaScript, run_script_many

log = logging.getLogger("app.feed.impressions")

IMPRESSIONS = Counter(
    "feed_impressions_total",
    "Post impressions by outcome: recorded (written to Redis), dropped (a failed flush)",
    ["outcome"],
)
_RECORDED = IMPRESSIONS.labels("recorded")
_DROPPED = IMPRESSIONS.labels("dropped")
UNREAD = Counter(
    "feed_impression_reads_failed_total",
    "RANKED rankings done without the viewer's impressions (Redis failed or was late)",
)


# One call per viewer: trim first, to the newest `cap - n` (rank 0 is the oldest score), so
# the zset never holds more than `cap`: one that grew past 128 members would stay a skiplist
# (~120 B per entry) after trimming back, not a listpack (~25 B). Idempotent (a retry after
# NOSCRIPT repeats it harmlessly).
_ADD = LuaScript(
    "impressions_add",
    """
local cap = tonumber(ARGV[1])
local keep = cap - (#ARGV - 2) / 2
if keep > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -keep - 1)
else
  redis.call('DEL', KEYS[1])
end
redis.call('ZADD', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
""",
)


def impressions_key(viewer_id: int) -> str:
    """A viewer's impressions zset; the hash tag keeps it on the viewer's slot."""
    return f"imp:{{{viewer_id}}}"


def _member(post_id: int) -> str:
    return f"{post_id:019d}"


def reported_ids(raw: Sequence[str]) -> list[int]:
    """The post ids of a client's report; BAD_USER_INPUT for too many or a malformed one.
    Whether the viewer may see a post is not checked: an impression only ever reorders the
    viewer's own feed, and posts they may not see never reach it anyway."""
    return parse_reported_ids(raw, MAX_REPORTED)


class ImpressionLog(BackgroundFlush):
    """Buffer, batch writer and reader of the viewers' impressions (see the module doc)."""

    def __init__(self, redis: AnyRedis, max_per_viewer: int, ttl_seconds: int) -> None:
        super().__init__("impression")
        self.redis = redis
        self.max_per_viewer = max_per_viewer
        self.ttl_seconds = ttl_seconds
        self._pending: dict[int, dict[int, int]] = {}  # viewer -> post id -> ms
        self._count = 0

    @property
    def enabled(self) -> bool:
        return self.max_per_viewer > 0

    def record(self, viewer_id: int, post_ids: Iterable[int], now_ms: int | None = None) -> None:
        """Buffer impressions (no I/O); the batch is written shortly, off this request."""
        if not self.enabled:
            return
        post_ids = list(post_ids)
        if not post_ids:  # an empty page: nothing to write (the script wants members)
            return
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        batch = self._pending.setdefault(viewer_id, {})
        before = len(batch)
        for post_id in post_ids:
            batch.pop(post_id, None)  # re-inserted: the dict stays oldest impression first
            batch[post_id] = ms
        self._count += len(batch) - before
        if (
            len(batch) > IMPRESSIONS_MAX_PER_VIEWER_BATCH
        ):  # keep the newest impressions of this batch
            drop = len(batch) - IMPRESSIONS_MAX_PER_VIEWER_BATCH
            for post_id in list(batch)[:drop]:
                del batch[post_id]
            self._count -= drop
        self._schedule(0.0 if self._count >= IMPRESSIONS_MAX_PENDING else IMPRESSIONS_FLUSH_SECONDS)

    def pending(self, viewer_id: int) -> set[int]:
        """This process's buffered, not yet written impressions of a viewer."""
        return set(self._pending.get(viewer_id, ()))

    async def seen(self, viewer_id: int) -> set[int]:
        """Posts the viewer has had impressions of (written and buffered): one ZRANGE."""
        if not self.enabled:
            return set()
        members = cast(list[bytes], await self.redis.zrange(impressions_key(viewer_id), 0, -1))
        found = {int(m) for m in members}
        found.update(self._pending.get(viewer_id, ()))
        return found

    def seen_command(self, viewer_id: int) -> tuple[Any, ...]:
        """The command `seen` sends, for a caller that pipelines it with other reads of the
        viewer's slot; `seen_reply` reads its reply."""
        return ("ZRANGE", impressions_key(viewer_id), 0, -1)

    def seen_reply(self, viewer_id: int, reply: Any) -> set[int]:
        """`seen`'s answer from the reply of `seen_command` (a pipeline's: an error is
        raised); the buffered ones are added as they are now, as `seen` does."""
        if isinstance(reply, Exception):
            raise reply
        found = {int(m) for m in reply}
        found.update(self._pending.get(viewer_id, ()))
        return found

    async def flush(self) -> int:
        """Write the buffered batch now, in one pipelined round trip; the ids written."""
        self._cancel_timer()
        batch, self._pending, self._count = self._pending, {}, 0
        if not batch:
            return 0
        written = sum(len(ids) for ids in batch.values())
        cap = self.max_per_viewer
        calls = []
        for viewer_id, ids in batch.items():
            if not ids:
                continue
            args: list[int | str] = [cap, self.ttl_seconds]
            for post_id, ms in list(ids.items())[-cap:]:
                args += (ms, _member(post_id))
            calls.append(([impressions_key(viewer_id)], args))
        if not calls:
            return 0
        try:
            await run_script_many(self.redis, _ADD, calls)
        except (RedisError, OSError):
            _DROPPED.inc(written)
            log.warning("dropped %d impressions: Redis unavailable", written, exc_info=True)
            return 0
        _RECORDED.inc(written)
        return written

    def clear(self) -> None:
        """Drop what is buffered (tests: user ids restart with every test's empty tables)."""
        self._cancel_timer()
        self._pending, self._count = {}, 0
