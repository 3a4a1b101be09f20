"""The filter and hydration stage: which candidates the viewer may see now, read with
everything the page shows of them (one query: app.feed.rows), counted as filtered out.
Recommended candidates (a RANKED session's, `SessionRanking.recommended`) are judged by the
recommendation rule, the others by the home feed's; model scores never come into it.

With replicas (decision 0086) the whole query runs on the least loaded replica that keeps
up, and its answer is served only when that replica is proven to hold every narrowing
watermark concerning the page (app.db.watermarks): the viewer's own (blocks either way,
unfollows, hides, mutes, the viewer's own writes) and the shown rows' authors' (deletes,
visibility narrowings, edits). Else the primary answers, as it does without replicas.

Marks cover what a page must not show; a post it must show may be missing too: one in a
timeline (or a frozen session, read on the primary or a replica further ahead) that this
replica has not replayed yet. A filter answer lacking a candidate written after the last
commit the replica had replayed (by the time its id carries, less REPLAY_CLOCK_MARGIN_MS) is
not served either: the primary says whether it is gone or just new. Else a session page would
skip it for good, and a first page would hold back a post fan-out already delivered."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from functools import partial
from typing import TypeVar

from app.db.replica import (
    BEHIND,
    ERROR,
    MARKS_UNKNOWN,
    OK,
    REPLICA_ERRORS,
    REPLICA_READS,
    ReplicaRouter,
    ReplicaSet,
)
from app.db.watermarks import Watermarks
from app.feed import rows as sql
from app.feed.constants import REPLAY_CLOCK_MARGIN_MS
from app.feed.rows import FeedRow, PageExtras, RankColumns, Reads
from app.observability.metrics import FEED_FILTERED
from app.posts.ids import created_ms

T = TypeVar("T")

PAGE_USE = "feed_page"  # keyset and session pages' rows (first pages' shown rows too)
RANK_USE = "feed_rank"  # a RANKED first page's filter over its candidates
CONTEXT_USE = "feed_context"  # the viewer's context (graph, own posts, affinity)
RECOMMENDED_USE = "feed_recommended"  # the recommendation source's candidate ids


class PageFilter:
    """The authoritative filter over candidates; on a replica when one is proven current for
    the page (decision 0086), else on the primary."""

    def __init__(
        self,
        reads: Reads,
        replicas: ReplicaSet | None = None,
        marks: Watermarks | None = None,
    ) -> None:
        self.reads = reads
        self.replicas = replicas if marks is not None else None
        self.marks = marks
        self._replica_reads: dict[int, Reads] = (
            {id(r): Reads(r.engine) for r in replicas.routers} if replicas is not None else {}
        )

    async def routed(
        self,
        use: str,
        viewer_id: int,
        run: Callable[[Reads], Awaitable[T]],
        authors: Callable[[T], Iterable[int]],
        lacking: Callable[[T], Iterable[int]] | None = None,
    ) -> T:
        """`run(reads)` on a replica whose replayed LSN, known before the query's snapshot,
        is past every watermark of the viewer and of the `authors` of its answer; else (no
        replica keeps up, it fails, a mark is newer, the marks are unknown) on the primary.

        Why the order is safe: the router's LSN comes from a check that ended before this
        query began, on the same server run (no connection opened since: a restarted
        server's snapshots may start lower), and replay only moves forward, so the query's
        snapshot holds at least that LSN. The marks are read after the query: a narrowing
        acknowledged before the page was asked for has its mark by then. `lacking`: the
        candidate ids the answer judged and left out (see the module docstring)."""
        return (await self.routed_where(use, viewer_id, run, authors, lacking))[0]

    async def routed_where(
        self,
        use: str,
        viewer_id: int,
        run: Callable[[Reads], Awaitable[T]],
        authors: Callable[[T], Iterable[int]],
        lacking: Callable[[T], Iterable[int]] | None = None,
    ) -> tuple[T, bool]:
        """`routed`, and whether a replica answered."""
        replicas, marks = self.replicas, self.marks
        if replicas is None or marks is None:
            return await run(self.reads), False
        router, why = await replicas.pick()
        if router is None:
            REPLICA_READS.labels(use, why, "").inc()
            return await run(self.reads), False
        served = await self._on_replica(use, viewer_id, router, run, authors, lacking, marks)
        if served is None:
            return await run(self.reads), False
        return served[0], True

    async def _on_replica(
        self,
        use: str,
        viewer_id: int,
        router: ReplicaRouter,
        run: Callable[[Reads], Awaitable[T]],
        authors: Callable[[T], Iterable[int]],
        lacking: Callable[[T], Iterable[int]] | None,
        marks: Watermarks,
    ) -> tuple[T] | None:
        """(the replica's answer,) when it is proven current for the page, else None (counted
        by why)."""
        lsn, connects = router.known_lsn()
        replayed_ms = router.replayed_ms  # of the same check as `lsn`
        if lsn is None:
            REPLICA_READS.labels(use, BEHIND, router.name).inc()
            return None
        router.inflight += 1
        try:
            result = await run(self._replica_reads[id(router)])
        except REPLICA_ERRORS:
            router.failed()
            REPLICA_READS.labels(use, ERROR, router.name).inc()
            return None
        finally:
            router.inflight -= 1
        if router.connects != connects:  # a connection opened meanwhile: maybe a restart
            REPLICA_READS.labels(use, BEHIND, router.name).inc()
            return None
        if lacking is not None:
            newer = replayed_ms - REPLAY_CLOCK_MARGIN_MS
            if any(created_ms(post_id) > newer for post_id in lacking(result)):
                REPLICA_READS.labels(use, BEHIND, router.name).inc()
                return None
        mark = await marks.concern(viewer_id, set(authors(result)))
        if mark is None:
            REPLICA_READS.labels(use, MARKS_UNKNOWN, router.name).inc()
            return None
        if mark > lsn:
            REPLICA_READS.labels(use, BEHIND, router.name).inc()
            return None
        REPLICA_READS.labels(use, OK, router.name).inc()
        return (result,)

    async def visible_rows(
        self,
        viewer_id: int,
        ids: Sequence[int],
        extras: PageExtras,
        newest: int | None = None,
        recommended: Collection[int] = (),
    ) -> dict[int, FeedRow]:
        """The visible rows among ids (the `newest` ones only, for id-ordered candidates);
        the `recommended` ones judged by the recommendation rule, the rest by the home
        feed's (app.feed.rows). Authors and likes go into `extras` only from the answer
        served (a replica's discarded answer leaves no trace)."""
        if not ids:
            return {}

        async def run(reads: Reads) -> tuple[dict[int, FeedRow], PageExtras]:
            found = PageExtras()
            rows = await sql.page_rows(reads, viewer_id, ids, found, newest, recommended)
            return rows, found

        def lacking(answer: tuple[dict[int, FeedRow], PageExtras]) -> list[int]:
            rows = answer[0]
            return [i for i in _judged(ids, rows, newest) if i not in rows]

        visible, found = await self.routed(PAGE_USE, viewer_id, run, _row_authors, lacking)
        extras.authors.update(found.authors)
        extras.liked.update(found.liked)
        extras.covered.update(found.covered)
        FEED_FILTERED.inc(len(_judged(ids, visible, newest)) - len(visible))
        return visible

    async def session_rows(
        self,
        viewer_id: int,
        ids: Sequence[int],
        extras: PageExtras,
        recommended: Collection[int] = (),
    ) -> dict[int, FeedRow]:
        """`visible_rows` for a frozen session's positions (first pages' shown rows too)."""
        return await self.visible_rows(viewer_id, ids, extras, None, recommended)

    async def rank_rows(
        self, viewer_id: int, ids: Sequence[int], recommended: Collection[int] = ()
    ) -> RankColumns:
        """A RANKED first page's filter over its candidates (app.feed.rows.rank_rows), routed
        as `visible_rows` is: the visible candidates' authors are the ones whose marks count."""
        return await self.routed(
            RANK_USE,
            viewer_id,
            partial(_rank, viewer_id=viewer_id, ids=ids, recommended=recommended),
            _rank_authors,
            lambda columns: set(ids).difference(columns.post_ids),
        )


def _judged(ids: Sequence[int], rows: Collection[int], newest: int | None) -> Sequence[int]:
    """The candidates a filter answer of `rows` judged: all of them, or when the answer was
    cut by the `newest` limit, those down to the oldest row returned."""
    if newest is not None and len(rows) == newest:
        oldest = min(rows)
        return [i for i in ids if i >= oldest]
    return ids


async def _rank(
    reads: Reads, viewer_id: int, ids: Sequence[int], recommended: Collection[int]
) -> RankColumns:
    return await sql.rank_rows(reads, viewer_id, ids, recommended)


def _row_authors(answer: tuple[dict[int, FeedRow], PageExtras]) -> Iterable[int]:
    return answer[1].authors.keys()


def _rank_authors(columns: RankColumns) -> Iterable[int]:
    return columns.author_ids
