"""The ranking stage of a RANKED first page: the visible candidates' ranking columns, the
viewer's impressions and "show fewer" feedback (read at once), then the order within
RANKING_BUDGET_MS: the viewer's version and arm (app.ranking.registry), stage 1 (the formula)
cutting to RANKING_STAGE2_CANDIDATES, stage 2 (the version's model) on those, then the rules
(seen last, frequency, diversity: app.ranking.stages). Past the budget in stage 2, or a model
that raises, the window keeps stage-1 order, degraded ("ranking_model"); past it in stage 1
the window stays newest first, degraded ("ranking_timeout").

Model scores only ever order rows the filter already allowed (`rank_visible` reads the
columns through the home-feed rule): a model cannot add a post, only move one."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple

from prometheus_client import Counter
from redis.exceptions import RedisError

from app.config import Settings
from app.feed.aio import concurrently
from app.feed.deadline import SourceDeadline
from app.feed.filter import PageFilter
from app.feed.first_reads import FirstReads
from app.feed.impressions import UNREAD, ImpressionLog
from app.feed.rows import RankColumns, Reads
from app.feed.sessions import SessionRanking
from app.observability.metrics import FEED_DEGRADED, FEED_FILTERED
from app.ranking.features import (
    NegativeFeedback,
    NoFeedback,
    PriorQuality,
    SourceQuality,
    ViewerSignals,
)
from app.ranking.registry import Choice, ModelRegistry, formula_only
from app.ranking.scoring import RankingTimeout
from app.ranking.stages import Ranked, two_stage

STAGE2_FALLBACKS = Counter(
    "feed_ranking_stage2_fallbacks_total",
    "RANKED rankings whose stage 2 (the model) was not used: reason=budget (past "
    "RANKING_BUDGET_MS) or error (the model raised); the session keeps stage-1 order",
    ["model", "reason"],
)
RANKINGS = Counter(
    "feed_rankings_total", "RANKED sessions ranked, by model version and arm", ["model", "arm"]
)


class Visible(NamedTuple):
    """What ranking reads of a first page's candidates: the visible ones' columns (newest
    first), the posts the viewer had impressions of, their "show fewer" per author."""

    columns: RankColumns
    seen: set[int]
    fewer: Mapping[int, float]


@dataclass
class WindowRanking:
    """A ranked window: ids in session order, whether the page is degraded for ranking, and
    what the session stores of it (version, arm, recommended ids)."""

    ids: list[int]
    degraded: bool
    ranking: SessionRanking
    detail: Ranked | None = field(default=None, repr=False)  # scores, for `explain`


class RankStage:
    """Reads what ranking needs of the candidates and orders a session's window."""

    def __init__(
        self,
        reads: Reads,
        impressions: ImpressionLog,
        settings: Settings,
        deadline: SourceDeadline,
        registry: ModelRegistry | None = None,
        quality: SourceQuality | None = None,
        feedback: NegativeFeedback | None = None,
        filter_: PageFilter | None = None,
    ) -> None:
        self.reads = reads
        # The candidates' filter: on a replica proven current for the viewer (decision 0086).
        self.filter = filter_ or PageFilter(reads)
        self.impressions = impressions
        self.settings = settings
        self.deadline = deadline
        # Swapped whole by a reload (`reload`): sessions carry their version, so a swap
        # only changes what new sessions get.
        self.registry = registry or formula_only()
        self.quality: SourceQuality = quality or PriorQuality()
        self.feedback: NegativeFeedback = feedback or NoFeedback()

    def reload(self, registry: ModelRegistry) -> None:
        """Serve another registry from the next new session on (open ones keep theirs)."""
        self.registry = registry

    async def rank_visible(
        self,
        viewer_id: int,
        ids: Sequence[int],
        first_reads: FirstReads | None = None,
        recommended: Collection[int] = (),
    ) -> Visible:
        """The visible candidates' four ranking columns (the shown rows are read in full
        later), the posts the viewer had impressions of and their feedback: at once, Redis
        while Postgres filters (or the impressions from a first page's pipeline).
        `recommended`: the ids the filter judges by the recommendation rule (app.feed.rows)."""
        fewer: Mapping[int, float]
        if first_reads is not None and first_reads.seen is not None:
            if isinstance(self.feedback, NoFeedback):  # nothing to read: no extra task
                visible, fewer = await self.filter.rank_rows(viewer_id, ids, recommended), {}
            else:
                visible, fewer = await concurrently(
                    self.filter.rank_rows(viewer_id, ids, recommended), self._fewer(viewer_id)
                )
            seen = self._seen_read(viewer_id, first_reads, first_reads.seen)
        else:
            visible, (seen, fewer) = await concurrently(
                self.filter.rank_rows(viewer_id, ids, recommended),
                self._seen_and_fewer(viewer_id),
            )
        FEED_FILTERED.inc(len(ids) - len(visible.post_ids))
        return Visible(visible, seen, fewer)

    def choose(self, viewer_id: int) -> Choice:
        """The version and arm a new session of the viewer is ranked with."""
        return self.registry.choose(viewer_id)

    def rank_window(
        self,
        viewer_id: int,
        window: RankColumns,
        affinity: dict[int, int],
        seen: AbstractSet[int],
        recommended: AbstractSet[int] = frozenset(),
        fewer: Mapping[int, float] | None = None,
        choice: Choice | None = None,
    ) -> WindowRanking:
        """The window's ids in session order. Degraded when stage 2 was not used (stage-1
        order) or stage 1 ran out of the budget (newest first)."""
        choice = choice or self.choose(viewer_id)
        stored = frozenset(p for p in window.post_ids if p in recommended) if recommended else None
        ranking = SessionRanking(choice.version, choice.arm, stored or frozenset())
        RANKINGS.labels(choice.version, choice.arm or "none").inc()
        now_ms = int(time.time() * 1000)
        deadline = time.perf_counter() + self.settings.ranking_budget_ms / 1000
        signals = ViewerSignals(
            now_ms,
            affinity,
            self.quality,
            fewer or {},
            recommended,
            seen,
        )
        try:
            ranked = two_stage(
                *window,
                affinity,
                seen,
                choice.scorer,
                signals,
                self.settings.ranking_stage2_candidates,
                deadline,
                self.settings.ranking_max_per_author,
            )
        except RankingTimeout:
            FEED_DEGRADED.labels("ranking_timeout").inc()
            # Newest first (the window's recommendations lead it: app.feed.rows).
            return WindowRanking(sorted(window.post_ids, reverse=True), True, ranking)
        if ranked.fallback is not None:
            STAGE2_FALLBACKS.labels(choice.version, ranked.fallback).inc()
            FEED_DEGRADED.labels("ranking_model").inc()
        ids = [window.post_ids[i] for i in ranked.order]
        return WindowRanking(ids, ranked.fallback is not None, ranking, ranked)

    async def _seen_and_fewer(self, viewer_id: int) -> tuple[set[int], Mapping[int, float]]:
        if isinstance(self.feedback, NoFeedback):
            return await self._seen(viewer_id), {}
        return await concurrently(self._seen(viewer_id), self._fewer(viewer_id))

    async def _fewer(self, viewer_id: int) -> Mapping[int, float]:
        """The viewer's "show fewer" per author; none when it cannot be read in time (a
        ranking weight, never a filter: hidden posts and muted authors are the filter's)."""
        try:
            return await self.deadline.within(self.feedback.fewer(viewer_id))
        except (RedisError, TimeoutError, OSError):
            return {}

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
