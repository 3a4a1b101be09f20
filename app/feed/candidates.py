"""Candidates: the ids a page may show, newest first, merged from the candidate sources -
the home timeline, the pulled authors, the viewer's own posts and, under fan-out queue lag,
the followees' recent posts from PostgreSQL; on a RANKED first page also the recommendation
source's. Each source reads within its budget (app.feed.sources: max candidates, timeout,
concurrency); one that is late or fails is dropped and the page goes on without it,
degraded. Sources only propose: the filter decides.

A first page's merge is remembered per viewer (`Merges`) and reused while its sources are
the very same."""

from __future__ import annotations

import asyncio
from array import array
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from typing import Protocol

from prometheus_client import Counter
from redis.exceptions import RedisError

from app.feed import rows as sql
from app.feed.aio import concurrently, retrieve
from app.feed.constants import LAG_WINDOW, MAX_ID, MERGES_MAX, OWN_PER_READ
from app.feed.home_timeline import HomeTimeline, TimelineRead
from app.feed.pulled import PulledAuthors
from app.feed.recommended import RecommendationSource
from app.feed.rows import Reads, ViewerContext
from app.feed.sessions import candidates_signature
from app.feed.sources import SourceBudgets, SourceDropped
from app.observability.metrics import FEED_CANDIDATES, FEED_DEDUPED, FEED_DEGRADED


class LagSignal(Protocol):
    """Whether fan-out runs late (app.fanout.lag.LagProbe): reads then pull recent posts."""

    async def lagging(self) -> bool: ...


@dataclass
class Candidates:
    # Newest first, deduped; then the recommendation source's ids that no followed source
    # proposed (`recommended`), in its order (not cut by the round's limit: bounded by
    # FEED_SOURCE_RECOMMENDED_MAX).
    ids: list[int]
    maybe_more: bool  # a source was cut at its limit: older posts may exist
    degraded: bool
    signature: bytes | None = None  # candidates_signature(ids, maybe_more), when known
    recommended: frozenset[int] = frozenset()  # judged by the recommendation rule


_NONE: list[int] = []  # "no recommendations asked": one object, so the memo compares by identity


@dataclass(slots=True)
class _Merge:
    """A first page's candidate merge and what it was made from (`Merges`)."""

    limit: int
    own_limit: int
    timeline: array[int]
    timeline_full: bool
    pulled: tuple[tuple[int, list[int]], ...]  # the author cache's own lists
    own: tuple[int, ...]
    recommended_source: list[int]  # the recommendation source's own list (identity)
    ordered: array[int]
    maybe_more: bool
    duplicates: int
    signature: bytes
    recommended: frozenset[int]


class Merges:
    """viewer -> their last first page's merged candidates, reused when the sources are the
    very same: the timeline's ids equal, each pulled author's list the same object (the
    author cache hands back the object it held while a reload finds the same ids), the own
    posts and limits equal. Merging a heavy viewer's ~2,600 ids and signing the result cost
    ~0.3-0.5 ms per first page; comparing the sources costs a few microseconds. A pure
    function of its inputs: the same sources give the same candidates, so nothing here can
    be stale."""

    def __init__(self, max_entries: int = MERGES_MAX) -> None:
        self.max_entries = max_entries
        self._last: dict[int, _Merge] = {}

    def find(
        self,
        viewer_id: int,
        limit: int,
        own_limit: int,
        timeline: array[int],
        timeline_full: bool,
        pulled: dict[int, list[int]],
        own: list[int],
        recommended: list[int],
    ) -> _Merge | None:
        found = self._last.get(viewer_id)
        if (
            found is None
            or found.recommended_source is not recommended
            or found.limit != limit
            or found.own_limit != own_limit
            or found.timeline_full != timeline_full
            or len(found.pulled) != len(pulled)
            or found.timeline != timeline
            or found.own != tuple(own)
        ):
            return None
        for author, ids in found.pulled:
            if pulled.get(author) is not ids:
                return None
        return found

    def remember(self, viewer_id: int, merge: _Merge) -> None:
        self._last.pop(viewer_id, None)
        self._last[viewer_id] = merge
        while len(self._last) > self.max_entries:
            del self._last[next(iter(self._last))]

    def clear(self) -> None:
        self._last.clear()


_SOURCE_METRICS: dict[str, Counter] = {}


def _count_source(source: str, n: int) -> None:
    metric = _SOURCE_METRICS.get(source)
    if metric is None:
        metric = _SOURCE_METRICS[source] = FEED_CANDIDATES.labels(source)
    metric.inc(n)


def _pulled_ids(pulled: dict[int, list[int]], before: int, cap: int) -> list[int]:
    """The pulled authors' post ids below `before` (all of them on a first page), in C; the
    newest `cap` when there are more (FEED_SOURCE_PULL_MAX)."""
    found = list(chain.from_iterable(pulled.values()))
    if before != MAX_ID:
        found = [p for p in found if p < before]
    if len(found) > cap:
        found.sort(reverse=True)
        del found[cap:]
    return found


class CandidateSources:
    """Gathers and merges one candidate round from every source."""

    def __init__(
        self,
        timeline: HomeTimeline,
        pulled: PulledAuthors,
        reads: Reads,
        lag: LagSignal,
        budgets: SourceBudgets,
        recommendations: RecommendationSource,
    ) -> None:
        self.timeline = timeline
        self.pulled = pulled
        self.reads = reads
        self.lag = lag
        self.budgets = budgets
        self.recommendations = recommendations
        # Each viewer's last first-page merge of candidates, and its sources (`Merges`).
        self.merges = Merges()

    async def gather(
        self,
        viewer_id: int,
        context: ViewerContext,
        before: int,
        limit: int,
        timeline: TimelineRead | None = None,
        recommend: bool = False,
    ) -> Candidates:
        """Timeline + pulled authors + own posts (+ recent followee posts under lag; +
        recommendations when `recommend`: RANKED first pages), each within its budget.

        The pulled authors and the lag probe are in-process caches that almost always answer
        without I/O, so they are awaited in turn rather than as gathered tasks; so are the
        recommendations while the viewer's are cached. A recommendation read that goes to
        PostgreSQL runs as one task beside the others (once per viewer per
        FEED_RECOMMENDED_CACHE_SECONDS).
        """
        budgets = self.budgets
        recommended: list[int] = _NONE
        rec_read: asyncio.Future[list[int]] | None = None
        if recommend:
            cached = self.recommendations.cached(viewer_id)
            if cached is not None:
                recommended = cached
            else:
                rec_read = asyncio.ensure_future(
                    budgets["recommended"].run(self.recommendations.read_recommended(viewer_id))
                )
                rec_read.add_done_callback(retrieve)  # read below, unless this page fails
        try:
            read, pulled, pulled_ok = await self._followed(
                viewer_id, context, before, limit, timeline
            )
        except BaseException:
            if rec_read is not None:
                rec_read.cancel()
            raise
        degraded = False
        if rec_read is not None:
            try:
                recommended = await rec_read
            except SourceDropped:
                recommended, degraded = _NONE, True
        lagging = await self._lagging()
        own, own_limit = context.own_below(before), context.own_limit
        if own is None:  # a later keyset round, below what the context read
            own_limit = min(limit, OWN_PER_READ, budgets["own"].max_candidates)
            try:
                own = await budgets["own"].run(
                    sql.own_posts_before(self.reads, viewer_id, before, own_limit)
                )
            except SourceDropped:
                own, degraded = [], True
        tl_ids, tl_full, tl_degraded = read
        degraded = degraded or tl_degraded or not pulled_ok
        memo = before == MAX_ID and not lagging and not degraded
        if memo:
            timeline_ids = array("q", tl_ids)
            merge = self.merges.find(
                viewer_id, limit, own_limit, timeline_ids, tl_full, pulled, own, recommended
            )
            if merge is not None:
                _count_source("timeline", len(tl_ids))
                _count_source("pull", sum(map(len, pulled.values())))
                _count_source("own", len(own))
                if recommended:
                    _count_source("recommended", len(recommended))
                FEED_DEDUPED.inc(merge.duplicates)
                return Candidates(
                    merge.ordered.tolist(),
                    merge.maybe_more,
                    False,
                    merge.signature,
                    merge.recommended,
                )
        sources: dict[str, list[int]] = {
            "timeline": tl_ids,
            "pull": _pulled_ids(pulled, before, budgets["pull"].max_candidates),
            "own": own,
        }
        if lagging:
            try:
                recent = await budgets["lag"].run(
                    sql.recent_followee_posts(
                        self.reads,
                        viewer_id,
                        datetime.now(UTC) - LAG_WINDOW,
                        min(limit, budgets["lag"].max_candidates),
                    )
                )
                sources["lag"] = [p for p in recent if p < before]
            except SourceDropped:
                degraded = True
            FEED_DEGRADED.labels("queue_lag").inc()
        for name, ids in sources.items():
            _count_source(name, len(ids))
        # Every source is newest first already (the timeline, each pulled author, own posts):
        # concatenated, they are a few dozen sorted runs, which one sort merges (Timsort
        # finds runs) at a fraction of sorting the same ids in set order; the duplicates are
        # then adjacent and dict.fromkeys drops them in C, keeping the order. A heavy
        # viewer's ~2,600 ids (~40 pulled authors x 50 + the timeline): 0.4-0.8x the CPU of
        # the set-then-sort (micro-benchmarks on a loaded machine).
        every = list(chain.from_iterable(sources.values()))
        every.sort(reverse=True)
        unique = list(dict.fromkeys(every))
        FEED_DEDUPED.inc(len(every) - len(unique))
        ordered = unique[:limit]
        cut = len(unique) > limit
        if own and len(own) >= own_limit:
            # More own posts may lie below the oldest read: the candidates stop there.
            floor = min(own)
            ordered, cut = [p for p in ordered if p >= floor], True
        chosen: frozenset[int] = frozenset()
        if recommended:
            # Recommendations after the cut (they are few, and older than a heavy viewer's
            # window may reach); one a followed source proposed too is followed: judged by
            # the home-feed rule, never passed as a recommendation.
            _count_source("recommended", len(recommended))
            followed = set(ordered)
            extra = [p for p in recommended if p not in followed]
            chosen = frozenset(extra)
            ordered = ordered + extra
        if not memo:
            return Candidates(ordered, tl_full or cut, degraded, None, chosen)
        signature = candidates_signature(ordered, tl_full or cut)
        self.merges.remember(
            viewer_id,
            _Merge(
                limit,
                own_limit,
                timeline_ids,
                tl_full,
                tuple(pulled.items()),
                tuple(own),
                recommended,
                array("q", ordered),
                tl_full or cut,
                len(every) - len(unique),
                signature,
                chosen,
            ),
        )
        return Candidates(ordered, tl_full or cut, False, signature, chosen)

    async def _followed(
        self,
        viewer_id: int,
        context: ViewerContext,
        before: int,
        limit: int,
        timeline: TimelineRead | None,
    ) -> tuple[TimelineRead, dict[int, list[int]], bool]:
        """The timeline (unless read already) and the pulled authors, each within its
        budget: a dropped one reads as nothing, degraded."""
        if timeline is None:
            read, (pulled, pulled_ok) = await concurrently(
                self._timeline(viewer_id, before, limit), self._pulled(context.pull_authors)
            )
        else:
            read, (pulled, pulled_ok) = timeline, await self._pulled(context.pull_authors)
        cap = self.budgets["timeline"].max_candidates
        if len(read[0]) > cap:
            read = (read[0][:cap], True, read[2])
        return read, pulled, pulled_ok

    async def _timeline(self, viewer_id: int, before: int, limit: int) -> TimelineRead:
        try:
            return await self.budgets["timeline"].run(
                self.timeline.read_timeline(viewer_id, before, limit)
            )
        except SourceDropped:
            return [], False, True

    async def _pulled(self, authors: list[int]) -> tuple[dict[int, list[int]], bool]:
        if not authors:
            return {}, True
        if self.pulled.cache.all_fresh(authors):
            # The author cache answers without I/O: no budget (its timer alone cost ~10-20 us
            # per page, measured), as the module doc of app.feed.sources says.
            return await self.pulled.read_pulled(authors)
        try:
            return await self.budgets["pull"].run(self.pulled.read_pulled(authors))
        except SourceDropped:
            return {}, False

    async def _lagging(self) -> bool:
        try:
            return await self.lag.lagging()
        except RedisError:
            return False
