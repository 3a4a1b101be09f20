"""Which page a request is, and the reads it starts with: a session cursor's page, a RANKED
first page, or a keyset page (CHRONOLOGICAL, or RANKED past its session). A page without a
session cursor reads the viewer's context (PostgreSQL) and home timeline (Redis) at once,
a first page both from one Redis pipeline when it can (app.feed.first_reads)."""

from __future__ import annotations

from app.config import FaultSwitches, Settings
from app.feed import recommended
from app.feed.aio import concurrently
from app.feed.candidates import CandidateSources
from app.feed.constants import CANDIDATE_SLACK, MAX_ID, OWN_PER_READ
from app.feed.context_cache import NOT_READ, ViewerContexts
from app.feed.cursor import Cursor, Keyset, SessionPosition
from app.feed.first_page import RankedFirstPages
from app.feed.first_reads import FirstReadsPipeline
from app.feed.keyset import KeysetPages, keyset_limit
from app.feed.modes import FeedMode
from app.feed.page import FeedPage, Stages
from app.feed.reset import CountReset
from app.feed.rows import PageExtras
from app.feed.session_pages import SessionPages
from app.observability.metrics import FEED_HYDRATION_BATCH
from app.users.reads import ReadCounter


class PageReader:
    def __init__(
        self,
        settings: Settings,
        faults: FaultSwitches,
        contexts: ViewerContexts,
        candidates: CandidateSources,
        first_reads: FirstReadsPipeline,
        ranked_first: RankedFirstPages,
        keyset: KeysetPages,
        session_pages: SessionPages,
        read_counter: ReadCounter,
    ) -> None:
        self.settings = settings
        self.faults = faults
        self.contexts = contexts
        self.candidates = candidates
        self.first_reads = first_reads
        self.ranked_first = ranked_first
        self.keyset = keyset
        self.session_pages = session_pages
        # Candidate-gathering reads counted for the fan-out control plane's read cost.
        self.read_counter = read_counter

    async def read_page(
        self,
        viewer_id: int,
        mode: FeedMode,
        first: int,
        cursor: Cursor | None,
        reset: CountReset | None = None,
        why: bool = False,
    ) -> FeedPage:
        stages = Stages()
        extras = PageExtras()
        if isinstance(cursor, SessionPosition):
            # test-only fault (app.config): the page repeats the post the last one ended at
            back = 1 if self.faults.feed_fault_repeat_post and cursor.position > 0 else 0
            page = await self.session_pages.session_page(
                viewer_id, cursor, first, stages, extras, back
            )
        else:
            self.read_counter.count()  # no I/O: pulled sources are read on these pages
            ranked_first = cursor is None and mode == FeedMode.RANKED
            before = cursor.post_id if isinstance(cursor, Keyset) else MAX_ID
            if isinstance(cursor, Keyset) and self.faults.feed_fault_repeat_post:
                before += 1  # test-only fault (app.config): an inclusive cursor repeats a post
            if ranked_first:
                limit = int(self.settings.feed_session_size * CANDIDATE_SLACK)
            else:
                limit = keyset_limit(first)
            first_reads = None
            if cursor is None and self.first_reads.possible and self.contexts.cache.ttl > 0:
                first_reads = await self.first_reads.read_first(viewer_id, limit, ranked_first)
            version: object = NOT_READ if first_reads is None else first_reads.token()
            # Independent sources, read at once: the viewer's graph (Postgres; affinity only
            # where ranking uses it) and the home timeline (Redis).
            context, timeline = await concurrently(
                self.contexts.read_context(
                    viewer_id, ranked_first, before, min(limit, OWN_PER_READ), version
                ),
                self.candidates.timeline.read_timeline(viewer_id, before, limit, first_reads),
            )
            stages.done("context")
            if ranked_first:
                page = await self.ranked_first.ranked_first_page(
                    viewer_id, context, timeline, first, stages, extras, reset, first_reads
                )
            else:
                if reset is not None:
                    reset.start()  # the timeline is read: the page shows what it announced
                page = await self.keyset.keyset_page(
                    viewer_id, context, before, first, stages, extras, timeline
                )
                page.first_page = cursor is None
        page.extras = extras
        if why and page.recommended:
            shown = [row.post_id for row, _ in page.rows if row.post_id in page.recommended]
            if shown:
                # Why each shown recommendation is: read now, so a liker since blocked,
                # unfollowed or gone is never named (app.feed.recommended).
                page.why = await recommended.why(self.candidates.reads, viewer_id, shown)
        # The page's posts: bodies, authors and likes all came with the rows (one query);
        # FeedPage.posts makes the Post type's view of them only for a reader that wants it.
        FEED_HYDRATION_BATCH.observe(len(page.rows))
        stages.done("hydrate")
        return page
