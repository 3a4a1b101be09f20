"""The home timeline as a candidate source: the viewer's Redis timeline, or PostgreSQL when
it is missing or Redis cannot answer in time (degraded); a missing timeline is rebuilt in
the background (in this process: docs/ARCHITECTURE.md says why not as a job)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

from app.feed import rows as sql
from app.feed.constants import MAX_ID
from app.feed.deadline import LoadTimeout, SourceDeadline
from app.feed.first_reads import TIMELINE, FirstReads
from app.feed.rows import Reads
from app.observability.metrics import FEED_DEGRADED
from app.posts.ids import created_ms
from app.timelines.store import TimelineStore

log = logging.getLogger("app.feed")

TimelineRead = tuple[list[int], bool, bool]  # (ids newest first, maybe more, degraded)


class HomeTimeline:
    """Reads a viewer's timeline below a bound; rebuilds a missing one, once at a time."""

    def __init__(
        self,
        store: TimelineStore,
        reads: Reads,
        deadline: SourceDeadline,
        rebuild: Callable[[int], Awaitable[int]],
    ) -> None:
        self.store = store
        self.reads = reads
        self.deadline = deadline
        self._rebuild = rebuild
        self._rebuilding: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def read_timeline(
        self, viewer_id: int, before: int, limit: int, first_reads: FirstReads | None = None
    ) -> TimelineRead:
        """(ids, maybe more, degraded). Missing timeline or Redis trouble: Postgres answers.
        `first_reads`: the newest entries already read (a first page's pipeline)."""
        entries: list[int] | None
        within = self.deadline.within
        try:
            if first_reads is not None:
                entries = self.store.latest_ids_reply(first_reads.reply(TIMELINE), limit)
            elif before == MAX_ID:
                entries = await within(self.store.latest_ids_or_none(viewer_id, limit))
            else:
                older = await within(
                    self.store.before(viewer_id, created_ms(before), before, limit)
                )
                entries = [p for p, _ in older]
            if before != MAX_ID and not entries and not await self.store.exists(viewer_id):
                entries = None
            reason = "timeline_missing"
        except LoadTimeout:
            entries, reason = None, "load_timeout"
        except TimeoutError:
            entries, reason = None, "redis_timeout"
        except (RedisError, OSError):
            entries, reason = None, "redis_down"
        if entries is not None:
            return entries, len(entries) >= limit, False
        FEED_DEGRADED.labels(reason).inc()
        if reason == "timeline_missing":
            self._schedule_rebuild(viewer_id)
        with self.deadline.falling_back():
            ids = await sql.followee_posts_before(self.reads, viewer_id, before, limit)
        return ids, len(ids) >= limit, True

    def _schedule_rebuild(self, viewer_id: int) -> None:
        """Rebuild a missing timeline in the background; the current read uses Postgres."""
        if viewer_id in self._rebuilding:
            return
        self._rebuilding.add(viewer_id)

        async def run() -> None:
            try:
                await self._rebuild(viewer_id)
            except Exception:  # a failed rebuild is retried by the next read
                log.exception("timeline rebuild for %s failed", viewer_id)
            finally:
                self._rebuilding.discard(viewer_id)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)  # keep a reference until done, or it may be collected
        task.add_done_callback(self._tasks.discard)
