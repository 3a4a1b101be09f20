"""Candidates: the ids a page may show, newest first, merged from the candidate sources -
the home timeline, the pulled authors, the viewer's own posts and, under fan-out queue lag,
the followees' recent posts from PostgreSQL. Sources only propose: the filter decides.

A first page's merge is remembered per viewer (`Merges`) and reused while its sources are
the very same."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from typing import Protocol

from prometheus_client import Counter
from redis.exceptions import RedisError

from app.feed import rows as sql
from app.feed.aio import concurrently
from app.feed.constants import LAG_WINDOW, MAX_ID, MERGES_MAX, OWN_PER_READ
from app.feed.home_timeline import HomeTimeline, TimelineRead
from app.feed.pulled import PulledAuthors
from app.feed.rows import Reads, ViewerContext
from app.feed.sessions import candidates_signature
from app.observability.metrics import FEED_CANDIDATES, FEED_DEDUPED, FEED_DEGRADED


class LagSignal(Protocol):
    """Whether fan-out runs late (app.fanout.lag.LagProbe): reads then pull recent posts."""

    async def lagging(self) -> bool: ...


@dataclass
class Candidates:
    ids: list[int]  # newest first, deduped
    maybe_more: bool  # a source was cut at its limit: older posts may exist
    degraded: bool
    signature: bytes | None = None  # candidates_signature(ids, maybe_more), when known


@dataclass(slots=True)
class _Merge:
    """A first page's candidate merge and what it was made from (`Merges`)."""

    limit: int
    own_limit: int
    timeline: array[int]
    timeline_full: bool
    pulled: tuple[tuple[int, list[int]], ...]  # the author cache's own lists
    own: tuple[int, ...]
    ordered: array[int]
    maybe_more: bool
    duplicates: int
    signature: bytes


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
    ) -> _Merge | None:
        found = self._last.get(viewer_id)
        if (
            found is None
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


def _pulled_ids(pulled: dict[int, list[int]], before: int) -> list[int]:
    """The pulled authors' post ids below `before` (all of them on a first page), in C."""
    found = list(chain.from_iterable(pulled.values()))
    return found if before == MAX_ID else [p for p in found if p < before]


class CandidateSources:
    """Gathers and merges one candidate round from every source."""

    def __init__(
        self,
        timeline: HomeTimeline,
        pulled: PulledAuthors,
        reads: Reads,
        lag: LagSignal,
    ) -> None:
        self.timeline = timeline
        self.pulled = pulled
        self.reads = reads
        self.lag = lag
        # Each viewer's last first-page merge of candidates, and its sources (`Merges`).
        self.merges = Merges()

    async def gather(
        self,
        viewer_id: int,
        context: ViewerContext,
        before: int,
        limit: int,
        timeline: TimelineRead | None = None,
    ) -> Candidates:
        """Timeline + pulled authors + own posts (+ recent followee posts under lag).

        The pulled authors and the lag probe are in-process caches that almost always answer
        without I/O, so they are awaited in turn rather than as gathered tasks.
        """
        read: TimelineRead
        if timeline is None:
            read, (pulled, pulled_ok) = await concurrently(
                self.timeline.read_timeline(viewer_id, before, limit),
                self.pulled.read_pulled(context.pull_authors),
            )
        else:
            read, (pulled, pulled_ok) = (
                timeline,
                await self.pulled.read_pulled(context.pull_authors),
            )
        lagging = await self._lagging()
        own, own_limit = context.own_below(before), context.own_limit
        if own is None:  # a later keyset round, below what the context read
            own_limit = min(limit, OWN_PER_READ)
            own = await sql.own_posts_before(self.reads, viewer_id, before, own_limit)
        tl_ids, tl_full, degraded = read
        degraded = degraded or not pulled_ok
        memo = before == MAX_ID and not lagging and not degraded
        if memo:
            timeline_ids = array("q", tl_ids)
            merge = self.merges.find(
                viewer_id, limit, own_limit, timeline_ids, tl_full, pulled, own
            )
            if merge is not None:
                _count_source("timeline", len(tl_ids))
                _count_source("pull", sum(map(len, pulled.values())))
                _count_source("own", len(own))
                FEED_DEDUPED.inc(merge.duplicates)
                return Candidates(merge.ordered.tolist(), merge.maybe_more, False, merge.signature)
        sources: dict[str, list[int]] = {
            "timeline": tl_ids,
            "pull": _pulled_ids(pulled, before),
            "own": own,
        }
        if lagging:
            recent = await sql.recent_followee_posts(
                self.reads, viewer_id, datetime.now(UTC) - LAG_WINDOW, limit
            )
            sources["lag"] = [p for p in recent if p < before]
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
        if not memo:
            return Candidates(ordered, tl_full or cut, degraded)
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
                array("q", ordered),
                tl_full or cut,
                len(every) - len(unique),
                signature,
            ),
        )
        return Candidates(ordered, tl_full or cut, False, signature)

    async def _lagging(self) -> bool:
        try:
            return await self.lag.lagging()
        except RedisError:
            return False
