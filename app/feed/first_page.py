"""A RANKED first page: candidates -> filter -> rank -> a new frozen session, its first
positions shown; or, when the candidates are exactly those the viewer's open session was
ranked from, that session again.

A refresh with nothing new reuses the open session. A RANKED first page reads its
candidates (timeline, pulled authors, own posts) as always; when they are exactly the ones
the viewer's last session in this process was ranked from (`OpenSessions`: a 16-byte
signature of the ids), less than FEED_SESSION_REUSE_SECONDS ago, the page is answered from
that session (same order, same sessionId, same cursors; its lifetime restarts) instead of
filtering and ranking ~600 candidates and writing a new session. What keeps it correct:
- every shown id is still checked against the current graph, blocks, tombstones and
  visibility (`SessionPages.from_session` runs the same SQL filter as a later page), so
  deletes, blocks and unfollows since the freeze apply, and the gaps they leave fill from
  the next positions;
- anything new changes the candidates, hence the signature: a post pushed into the timeline
  (also one older than its head, fanned out late), a pulled author's or the viewer's own
  post, a new follow (its author is pulled for RECENT_WINDOW), posts pulled under queue lag;
- a missing or unreadable session (expired, Redis trouble) means a fresh ranking, never an
  error; degraded reads are never reused nor remembered.
What it does not see for FEED_SESSION_REUSE_SECONDS (5 min): engagement that would reorder
the same posts, and a post among the same candidates that became visible again (made
public again); both are ranked in on the first refresh after that.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from redis.exceptions import RedisError

from app.config import Settings
from app.feed.aio import retrieve
from app.feed.candidates import CandidateSources
from app.feed.constants import CANDIDATE_SLACK, MAX_ID, SESSION_STORE_FALLBACK_SLACK
from app.feed.cursor import Keyset
from app.feed.filter import PageFilter
from app.feed.first_reads import SESSION, FirstReads
from app.feed.home_timeline import TimelineRead
from app.feed.page import FIRST_PAGE, FeedPage, Stages
from app.feed.rank import RankStage
from app.feed.reset import CountReset
from app.feed.rows import PageExtras, RankColumns, ViewerContext
from app.feed.session_pages import SessionPages
from app.feed.sessions import (
    FeedSession,
    FeedSessionStore,
    OpenSessions,
    candidates_signature,
)
from app.feed.sources import cap_share
from app.observability.metrics import FEED_DEGRADED
from app.posts.ids import created_ms

_SESSION_NEW = FIRST_PAGE.labels("session", "new")
_SESSION_REUSED = FIRST_PAGE.labels("session", "reused")


class RankedFirstPages:
    def __init__(
        self,
        settings: Settings,
        candidates: CandidateSources,
        rank: RankStage,
        filter_: PageFilter,
        feed_sessions: FeedSessionStore,
        open_sessions: OpenSessions,
        session_pages: SessionPages,
    ) -> None:
        self.settings = settings
        self.candidates = candidates
        self.rank = rank
        self.filter = filter_
        self.feed_sessions = feed_sessions
        self.open_sessions = open_sessions
        self.session_pages = session_pages

    async def ranked_first_page(
        self,
        viewer_id: int,
        context: ViewerContext,
        timeline: TimelineRead,
        first: int,
        stages: Stages,
        extras: PageExtras,
        reset: CountReset | None = None,
        first_reads: FirstReads | None = None,
    ) -> FeedPage:
        size = self.settings.feed_session_size
        share = self.settings.feed_recommended_share
        found = await self.candidates.gather(
            viewer_id,
            context,
            MAX_ID,
            int(size * CANDIDATE_SLACK),
            timeline,
            recommend=context.recommendations and share > 0,
        )
        stages.done("candidates")
        signature = None
        if not found.degraded:
            signature = found.signature or candidates_signature(found.ids, found.maybe_more)
        if signature is not None:
            reused = await self._reuse(
                viewer_id, signature, first, stages, extras, reset, first_reads
            )
            if reused is not None:
                return reused
        if reset is not None:
            reset.start()  # the candidates are read: the page shows what they announced
        # Ranking needs four columns of each candidate; the shown rows are read in full below.
        recommended = found.recommended
        read = await self.rank.rank_visible(viewer_id, found.ids, first_reads, recommended)
        stages.done("filter")
        window, beyond, oldest = session_window(read.columns, size, recommended)
        beyond = beyond or found.maybe_more
        ranked = self.rank.rank_window(
            viewer_id, window, context.affinity, read.seen, recommended, read.fewer or context.fewer
        )
        ids, ranking = ranked.ids, ranked.ranking
        if recommended:
            # The share of recommendations, on the ranked order (app.feed.sources).
            ids = cap_share(ids, recommended, share)
            kept = frozenset(i for i in ids if i in recommended)
            ranking = replace(ranking, recommended=kept)
        degraded = found.degraded or ranked.degraded
        stages.done("rank")
        tail = (created_ms(oldest), oldest) if oldest is not None and beyond else None
        # The session is written while its first positions are read (Postgres): one round
        # trip of waiting instead of two. The page is only answered once the write is done,
        # so its cursors always find the session (decision 0047).
        frozen = FeedSession(self.feed_sessions.new_id(), ids, tail, ranking)
        write = asyncio.ensure_future(
            self.feed_sessions.create(viewer_id, ids, tail, frozen.session_id, ranking)
        )
        write.add_done_callback(retrieve)
        try:
            page = await self.session_pages.from_session(
                viewer_id, frozen, 0, first, stages, extras, False
            )
        finally:
            # Waited for even when the page failed: a cancelled command costs a connection.
            await asyncio.wait([write])
        try:
            write.result()
            stages.done("session")
        except RedisError:
            # No session store: serve the freshest window as a keyset feed instead.
            FEED_DEGRADED.labels("session_store").inc()
            followed = [i for i in ids if i not in recommended]  # keyset: no recommendations
            newest = sorted(followed, reverse=True)[: first + SESSION_STORE_FALLBACK_SLACK]
            rows = await self.filter.visible_rows(viewer_id, newest, extras)
            shown = [rows[i] for i in newest if i in rows][:first]
            return FeedPage(
                [(r, Keyset(r.created_ms, r.post_id)) for r in shown],
                len(followed) > first or beyond,
                None,
                True,
                first_page=True,
            )
        _SESSION_NEW.inc()
        page.ranking = ranked.ranking
        if signature is not None and not degraded and self.open_sessions.max_age > 0:
            self.open_sessions.remember(viewer_id, frozen.session_id, signature)
        page.degraded, page.first_page = degraded, True
        return page

    async def _reuse(
        self,
        viewer_id: int,
        signature: bytes,
        first: int,
        stages: Stages,
        extras: PageExtras,
        reset: CountReset | None = None,
        first_reads: FirstReads | None = None,
    ) -> FeedPage | None:
        """The first page from the viewer's open session, if it was ranked from these very
        candidates; None: rank afresh. `first_reads` may hold the session already, renewed
        with the page's first reads."""
        open_ = self.open_sessions.matching(viewer_id, signature)
        if open_ is None:
            return None
        if reset is not None and not open_.reset_done:
            reset.start()
        try:
            if first_reads is not None and first_reads.session_id == open_.session_id:
                frozen = self.feed_sessions.decode(open_.session_id, first_reads.reply(SESSION))
            else:
                frozen = await self.feed_sessions.renew(viewer_id, open_.session_id)
        except (RedisError, TimeoutError, OSError):
            frozen = None
        if frozen is None:  # expired or lost: a new ranking, as if never opened
            self.open_sessions.forget(viewer_id)
            return None
        stages.done("session")
        _SESSION_REUSED.inc()
        page = await self.session_pages.from_session(
            viewer_id, frozen, 0, first, stages, extras, False
        )
        page.first_page = page.reused = True
        page.ranking = frozen.ranking
        return page


def session_window(
    visible: RankColumns, size: int, recommended: frozenset[int]
) -> tuple[RankColumns, bool, int | None]:
    """The session's window of the visible candidates: the newest `size` followed ones and
    every recommended one (few, and older than a heavy viewer's window may reach; the rank
    rows put them first: app.feed.rows); whether followed ones were left below it; the oldest
    followed id in it (where RANKED scrolling continues as a keyset: recommendations are no
    keyset's)."""
    ids = visible.post_ids
    k = 0
    if recommended:
        while k < len(ids) and ids[k] in recommended:
            k += 1
    end = size + k
    window = RankColumns(*(column[:end] for column in visible)) if len(ids) > end else visible
    oldest = window.post_ids[-1] if len(window.post_ids) > k else None
    return window, len(ids) > end, oldest
