"""What a session page's authoritative filter found, kept a few seconds for a PostgreSQL outage.

Freshness may degrade, authorization may not (docs/decisions/0019-postgres-outage.md). Every
session page runs the home-feed filter over its positions and one page more (the read-ahead);
`VerifiedWindow` is that result: positions [start, end) of one frozen session, every id in it
judged for this viewer at `at`, the visible ones with their hydrated rows, authors and likes.
When PostgreSQL cannot be reached, a page of that session that starts inside the window is
answered from it, marked degraded, while `at` is younger than FEED_AUTHZ_TTL_SECONDS: it shows
nothing the filter had not allowed that recently. Past it, or outside the window, the read
fails UNAVAILABLE.

In process, one window per viewer (their last session page), like `OpenSessions`: it costs
no I/O on the healthy path. A page that lands on another API process during an outage answers
UNAVAILABLE, which is the safe answer.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from app.feed.constants import VERIFIED_ROWS_MAX
from app.feed.rows import FeedAuthor, FeedRow
from app.posts.regions import current_region


@dataclass(slots=True)
class VerifiedWindow:
    session_id: str
    start: int  # first session position judged
    end: int  # positions [start, end) were all judged at `at`
    rows: list[tuple[int, FeedRow]]  # (position, row) of the visible ones, in position order
    authors: dict[int, FeedAuthor] = field(default_factory=dict)
    liked: set[int] = field(default_factory=set)
    at: float = 0.0  # time.monotonic() when its first filter query was sent
    # The region it was judged in (app.posts.regions): never served to a request judged in
    # another (a reader whose edge names another region now: decision 0088).
    region: str = field(default_factory=current_region)

    def rows_from(self, position: int) -> list[tuple[int, FeedRow]]:
        return [(p, row) for p, row in self.rows if p >= position]


class VerifiedPages:
    """viewer -> their last session page's `VerifiedWindow`, for `ttl_seconds` at most."""

    def __init__(self, ttl_seconds: float, max_rows: int = VERIFIED_ROWS_MAX) -> None:
        self.ttl = ttl_seconds
        self.max_rows = max_rows
        self._windows: OrderedDict[int, VerifiedWindow] = OrderedDict()
        self._rows = 0

    def __len__(self) -> int:
        return len(self._windows)

    def remember(self, viewer_id: int, window: VerifiedWindow) -> None:
        """Keep `window` as the viewer's (the one before goes); drop what is past the TTL."""
        if self.ttl <= 0:
            return
        self._drop(viewer_id)
        self._windows[viewer_id] = window
        self._rows += len(window.rows)
        # Windows are kept in the order they were checked: the stale ones are at the front.
        expired = time.monotonic() - self.ttl
        while self._windows:
            oldest_viewer, oldest = next(iter(self._windows.items()))
            if oldest.at >= expired and self._rows <= self.max_rows:
                break
            self._drop(oldest_viewer)

    def fresh(self, viewer_id: int, session_id: str, position: int) -> VerifiedWindow | None:
        """The viewer's window of `session_id` if it holds `position` and is within the TTL."""
        window = self._windows.get(viewer_id)
        if window is None or window.session_id != session_id:
            return None
        if window.region != current_region():
            return None
        if time.monotonic() - window.at > self.ttl:
            self._drop(viewer_id)
            return None
        return window if window.start <= position < window.end else None

    def _drop(self, viewer_id: int) -> None:
        window = self._windows.pop(viewer_id, None)
        if window is not None:
            self._rows -= len(window.rows)

    def clear(self) -> None:
        self._windows.clear()
        self._rows = 0
