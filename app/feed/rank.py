"""The ranking stage of a RANKED first page: the visible candidates' ranking columns and the
viewer's impressions (read at once), then the order (app.ranking.scoring) within
RANKING_BUDGET_MS; past it the window stays newest first, degraded."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence

from redis.exceptions import RedisError

from app.config import Settings
from app.feed import rows as sql
from app.feed.aio import concurrently
from app.feed.deadline import SourceDeadline
from app.feed.first_reads import FirstReads
from app.feed.impressions import UNREAD, ImpressionLog
from app.feed.rows import RankColumns, Reads
from app.observability.metrics import FEED_DEGRADED, FEED_FILTERED
from app.ranking.scoring import RankingTimeout, rank_columns


class RankStage:
    """Reads what ranking needs of the candidates and orders a session's window."""

    def __init__(
        self,
        reads: Reads,
        impressions: ImpressionLog,
        settings: Settings,
        deadline: SourceDeadline,
    ) -> None:
        self.reads = reads
        self.impressions = impressions
        self.settings = settings
        self.deadline = deadline

    async def rank_visible(
        self,
        viewer_id: int,
        ids: Sequence[int],
        first_reads: FirstReads | None = None,
        recommended: Collection[int] = (),
    ) -> tuple[RankColumns, set[int]]:
        """The visible candidates' four ranking columns (the shown rows are read in full
        later) and the posts the viewer had impressions of: at once, Redis while Postgres
        filters (or the impressions from a first page's pipeline). `recommended`: the ids
        the filter judges by the recommendation rule (app.feed.rows)."""
        if first_reads is not None and first_reads.seen is not None:
            visible = await sql.rank_rows(self.reads, viewer_id, ids, recommended)
            seen = self._seen_read(viewer_id, first_reads, first_reads.seen)
        else:
            visible, seen = await concurrently(
                sql.rank_rows(self.reads, viewer_id, ids, recommended), self._seen(viewer_id)
            )
        FEED_FILTERED.inc(len(ids) - len(visible.post_ids))
        return visible, seen

    def rank_window(
        self, window: RankColumns, affinity: dict[int, int], seen: set[int]
    ) -> tuple[list[int], bool]:
        """The window's ids in rank order, and True when ranking ran out of its budget (the
        window is then kept newest first)."""
        try:
            order = rank_columns(
                *window,
                affinity,
                int(time.time() * 1000),
                self.settings.ranking_budget_ms / 1000,
                seen,
            )
        except RankingTimeout:
            FEED_DEGRADED.labels("ranking_timeout").inc()
            return list(window.post_ids), True  # already newest first
        return [window.post_ids[i] for i in order], False

    async def _seen(self, viewer_id: int) -> set[int]:
        """Posts the viewer had impressions of; none (no demotion) when Redis cannot say."""
        try:
            return await self.deadline.within(self.impressions.seen(viewer_id))
        except (RedisError, TimeoutError, OSError):
            UNREAD.inc()
            return set()

    def _seen_read(self, viewer_id: int, first_reads: FirstReads, index: int) -> set[int]:
        """`_seen` from a first page's pipelined reads."""
        try:
            return self.impressions.seen_reply(viewer_id, first_reads.reply(index))
        except (RedisError, TimeoutError, OSError):
            UNREAD.inc()
            return set()
