"""Keyset pages: newest first below a post id, for CHRONOLOGICAL pages and for RANKED pages
past the end of their session. Candidate rounds, each filtered, until the page is full or
the sources run out."""

from __future__ import annotations

from app.feed.candidates import CandidateSources
from app.feed.constants import KEYSET_CANDIDATES_EXTRA, KEYSET_CANDIDATES_PER_POST, KEYSET_ROUNDS
from app.feed.cursor import Cursor, Keyset
from app.feed.filter import PageFilter
from app.feed.home_timeline import TimelineRead
from app.feed.page import FeedPage, Stages
from app.feed.rows import FeedRow, PageExtras, ViewerContext


def keyset_limit(first: int) -> int:
    """Candidates read per keyset round: room for some to be filtered out."""
    return first * KEYSET_CANDIDATES_PER_POST + KEYSET_CANDIDATES_EXTRA


class KeysetPages:
    def __init__(self, candidates: CandidateSources, filter_: PageFilter) -> None:
        self.candidates = candidates
        self.filter = filter_

    async def keyset_page(
        self,
        viewer_id: int,
        context: ViewerContext,
        before: int,
        first: int,
        stages: Stages,
        extras: PageExtras,
        timeline: TimelineRead | None = None,
    ) -> FeedPage:
        """Newest first below `before`; `timeline` is the first round's timeline, if read."""
        taken: list[tuple[FeedRow, Cursor]] = []
        degraded = False
        bound = before
        for _ in range(KEYSET_ROUNDS):
            found = await self.candidates.gather(
                viewer_id, context, bound, keyset_limit(first), timeline
            )
            timeline = None  # later rounds read below a new bound
            degraded = degraded or found.degraded
            # Candidates are newest first: the newest `first - taken + 1` visible ones decide
            # both the page and whether there is more.
            visible = await self.filter.visible_rows(
                viewer_id, found.ids, extras, first - len(taken) + 1
            )
            for post_id in found.ids:
                row = visible.get(post_id)
                if row is None:
                    continue
                if len(taken) == first:
                    return FeedPage(taken, True, None, degraded)
                taken.append((row, Keyset(row.created_ms, row.post_id)))
            if not found.maybe_more or not found.ids:
                break
            bound = found.ids[-1]
        stages.done("filter")
        has_next = len(taken) == first and found.maybe_more
        return FeedPage(taken, has_next, None, degraded)
