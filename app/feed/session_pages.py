"""Pages from a frozen feed session (app.feed.sessions): every id re-checked by the filter
as it is shown, one page read ahead; past the session's end, keyset pages below its oldest
candidate.

PostgreSQL out of reach (`Unavailable` from app.db): a session page is answered from the
viewer's verified window (app.feed.verified: what the last session page's filter allowed,
one page read ahead) while that check is younger than FEED_AUTHZ_TTL_SECONDS, degraded;
everything else fails UNAVAILABLE (docs/decisions/0019-postgres-outage.md).
"""

from __future__ import annotations

import time
from typing import cast

from redis.exceptions import RedisError

from app.errors import CursorExpired, Unavailable
from app.feed.constants import OWN_PER_READ, SESSION_SLACK
from app.feed.context_cache import ViewerContexts
from app.feed.cursor import Cursor, SessionPosition
from app.feed.filter import PageFilter
from app.feed.keyset import KeysetPages, keyset_limit
from app.feed.page import FeedPage, Stages, already_served
from app.feed.rows import FeedRow, PageExtras
from app.feed.sessions import FeedSession, FeedSessionStore
from app.feed.verified import VerifiedPages, VerifiedWindow
from app.observability.metrics import FEED_CURSOR_EXPIRED, FEED_DEGRADED


class SessionPages:
    def __init__(
        self,
        feed_sessions: FeedSessionStore,
        filter_: PageFilter,
        contexts: ViewerContexts,
        keyset: KeysetPages,
        authz_ttl_seconds: float,
    ) -> None:
        self.feed_sessions = feed_sessions
        self.filter = filter_
        self.contexts = contexts
        self.keyset = keyset
        # What each viewer's last session page's filter allowed, for a PostgreSQL outage.
        self.verified = VerifiedPages(authz_ttl_seconds)

    async def session_page(
        self,
        viewer_id: int,
        cursor: SessionPosition,
        first: int,
        stages: Stages,
        extras: PageExtras,
        back: int = 0,
    ) -> FeedPage:
        """The page at a session cursor; CURSOR_EXPIRED when the session is gone. `back`: the
        test-only FEED_FAULT_REPEAT_POST, read from that many positions before the cursor
        (the posts there are counted as the duplicates they are)."""
        try:
            frozen = await self.feed_sessions.load(viewer_id, cursor.session_id)
        except RedisError:
            frozen = None
        if frozen is None:
            FEED_CURSOR_EXPIRED.inc()
            raise CursorExpired("This feed session has expired; load the feed again from the top.")
        stages.done("session")
        start = cursor.position - back
        try:
            page = await self.from_session(viewer_id, frozen, start, first, stages, extras, True)
            if back:
                page.repeats += already_served(page.rows, frozen.ids[start : cursor.position])
        except Unavailable:
            verified = self._verified_page(viewer_id, frozen, cursor.position, first, extras)
            if verified is None:
                raise
            FEED_DEGRADED.labels("postgres_down").inc()
            page = verified
        page.ranking = frozen.ranking  # counted per model version and arm (app.feed.page)
        return page

    def _verified_page(
        self,
        viewer_id: int,
        frozen: FeedSession,
        position: int,
        first: int,
        extras: PageExtras,
    ) -> FeedPage | None:
        """PostgreSQL is out of reach: the page from `position` as the viewer's verified window
        of this session allowed it, if that check is within FEED_AUTHZ_TTL_SECONDS (degraded);
        None when no fresh check holds the position (app.feed.verified)."""
        window = self.verified.fresh(viewer_id, frozen.session_id, position)
        if window is None:
            return None
        found = window.rows_from(position)[:first]
        if not found and window.end < len(frozen.ids):
            return None  # the rest of the window is hidden; what follows was not checked
        taken: list[tuple[FeedRow, Cursor]] = [
            (row, SessionPosition(frozen.session_id, p + 1)) for p, row in found
        ]
        after = found[-1][0] + 1 if found else window.end
        has_next = after < len(frozen.ids) or frozen.tail is not None
        extras.authors.update(window.authors)
        extras.liked.update(window.liked)
        extras.covered.update(row.post_id for row, _ in taken)
        repeats = already_served(taken, frozen.ids, position)
        return FeedPage(
            taken,
            has_next,
            frozen.session_id,
            True,
            repeats=repeats,
            recommended=frozen.ranking.recommended,
        )

    async def from_session(
        self,
        viewer_id: int,
        frozen: FeedSession,
        position: int,
        first: int,
        stages: Stages,
        extras: PageExtras,
        continue_below: bool,
    ) -> FeedPage:
        """`first` visible posts from `position` of a frozen session; past its end (if
        `continue_below`), newest first below its oldest candidate."""
        taken: list[tuple[FeedRow, Cursor]] = []
        ids = frozen.ids
        # Each id under the rule it was frozen under: a recommendation's (app.posts.visibility
        # recommended_sql) for the ids the recommendation source proposed, else the home
        # feed's. Every id is re-checked now: deletes, blocks and unfollows apply at once, and the
        # gaps they leave are filled from the following positions. The check reads one page
        # ahead, kept as the viewer's verified window for a PostgreSQL outage (decision 0019).
        ahead = first if self.verified.ttl > 0 else 0
        checked: list[tuple[int, FeedRow]] = []
        start, at = position, time.monotonic()
        recommended = frozen.ranking.recommended
        while len(taken) < first and position < len(ids):
            # The read-ahead doubles as the slack for ids that turn out hidden.
            chunk = ids[position : position + first - len(taken) + max(SESSION_SLACK, ahead)]
            visible = await self.filter.session_rows(viewer_id, chunk, extras, recommended)
            for offset, post_id in enumerate(chunk, position):
                row = visible.get(post_id)
                if row is not None:
                    checked.append((offset, row))
                    if len(taken) < first:
                        taken.append((row, SessionPosition(frozen.session_id, offset + 1)))
            position += len(chunk)
        if ahead and position > start:
            window = VerifiedWindow(frozen.session_id, start, position, checked, at=at)
            window.authors, window.liked = extras.authors, extras.liked
            self.verified.remember(viewer_id, window)
        if len(taken) == first:
            position = cast(SessionPosition, taken[-1][1]).position
        stages.done("filter")
        repeats = already_served(taken, ids, start)
        if position < len(ids):
            return FeedPage(
                taken, True, frozen.session_id, False, repeats=repeats, recommended=recommended
            )
        if frozen.tail is None or len(taken) == first or not continue_below:
            return FeedPage(
                taken,
                frozen.tail is not None,
                frozen.session_id,
                False,
                repeats=repeats,
                recommended=recommended,
            )
        # The frozen window is used up: continue below its oldest post, newest first.
        left = first - len(taken)
        own_limit = min(keyset_limit(left), OWN_PER_READ)
        context = await self.contexts.read_context(viewer_id, False, frozen.tail[1], own_limit)
        rest = await self.keyset.keyset_page(
            viewer_id, context, frozen.tail[1], first - len(taken), stages, extras
        )
        # Below the window: none of the window's ids, served on this page or before it.
        repeats += already_served(rest.rows, ids)
        return FeedPage(
            taken + rest.rows,
            rest.has_next,
            frozen.session_id,
            rest.degraded,
            repeats=repeats,
            recommended=recommended,
        )
