"""A feed page as the read path answers it, and the page-level figures (decision 0023):
duplicates a scroll's pages would show, empty pages, per-stage timings."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice

from prometheus_client import Counter, Histogram

from app.feed.cursor import Cursor, Keyset
from app.feed.modes import FeedMode
from app.feed.recommended import Why
from app.feed.rows import FeedPost, FeedRow, PageExtras
from app.feed.sessions import SessionRanking
from app.observability.metrics import FEED_EMPTY_PAGES, FEED_PAGE_DUPLICATES, FEED_STAGE

# First-page work skipped or done, by kind: what the gates and the session reuse save.
FIRST_PAGE = Counter(
    "feed_first_page_total",
    "RANKED/CHRONOLOGICAL first pages by what they did: session new|reused; reset done|skipped",
    ["step", "outcome"],
)
# Exported at 0 from the start: an alert on them sees 0, not an absent series.
for _mode in FeedMode:
    FEED_PAGE_DUPLICATES.labels(_mode.value)
    for _page in ("first", "next"):
        FEED_EMPTY_PAGES.labels(_mode.value, _page)


@dataclass
class FeedPage:
    rows: list[tuple[FeedRow, Cursor]]
    has_next: bool
    session_id: str | None
    degraded: bool
    first_page: bool = False
    reused: bool = False  # a first page answered from the viewer's open session
    # Posts on this page that an earlier page of the same scroll covered (see `count_page`).
    repeats: int = 0
    # The session's ranking (model version, arm) for a page built from a session, else None.
    ranking: SessionRanking | None = None
    # Read with the rows, so the Post/User fields need no DataLoader queries of their own.
    extras: PageExtras = field(default_factory=PageExtras)
    # The session's ids that came from the recommendation source (their edges' reason is
    # RECOMMENDED), and why each shown one is recommended (app.feed.recommended).
    recommended: frozenset[int] = frozenset()
    why: dict[int, Why] = field(default_factory=dict)
    _posts: list[FeedPost] | None = field(default=None, repr=False, compare=False)

    @property
    def posts(self) -> list[FeedPost]:
        """The page's posts as the GraphQL Post type reads them, made when first asked for: a
        compiled plan that renders from the rows (app.api.fast.compiler) never asks."""
        posts = self._posts
        if posts is None:
            posts = self._posts = [
                FeedPost(
                    r.post_id,
                    r.author_id,
                    r.created_at,
                    r.body,
                    r.visibility,
                    r.version,
                    r.edited_at,
                    r.likes,
                    r.comments,
                )
                for r, _ in self.rows
            ]
        return posts


_STAGE_METRICS: dict[str, Histogram] = {}


class Stages:
    """Per-stage timings into the feed_read_stage_seconds histogram."""

    def __init__(self) -> None:
        self.mark = time.perf_counter()

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        metric = _STAGE_METRICS.get(stage)
        if metric is None:  # labels() takes a lock and builds a key: once per label, not per read
            metric = _STAGE_METRICS[stage] = FEED_STAGE.labels(stage)
        metric.observe(now - self.mark)
        self.mark = now


def count_page(mode: FeedMode, cursor: Cursor | None, shown: list[int], repeats: int) -> int:
    """The page-level service figures (decision 0023). Duplicates: posts the scroll's earlier
    pages covered, as the cursor tells: after a keyset cursor, ids at or above it (newest
    first: the earlier pages ended there); after a session cursor, the session's ids before
    its position and, below the frozen window, any of its ids (`repeats`, counted where the
    session page is built); plus any post twice on this page. The read path makes them
    impossible: the counter guards that, and stays 0.
    Empty: a page with no posts; a next page is only asked after hasNextPage was true."""
    duplicates = repeats + len(shown) - len(set(shown))
    if isinstance(cursor, Keyset):
        duplicates += sum(1 for post_id in shown if post_id >= cursor.post_id)
    if duplicates:
        FEED_PAGE_DUPLICATES.labels(mode.value).inc(duplicates)
    if not shown:
        FEED_EMPTY_PAGES.labels(mode.value, "first" if cursor is None else "next").inc()
    return duplicates  # the page's, for the engagement log's PAGE row


# The same figures per ranking model version and experiment arm (decision 0078), counted where
# a page is built from a session (first pages, reused or new, and session cursors' pages):
# a duplicate rate that rises with one version shows in its label alone.
RANKED_PAGES = Counter(
    "feed_ranked_pages_total", "Feed pages built from a RANKED session", ["model", "arm"]
)
RANKED_IMPRESSIONS = Counter(
    "feed_ranked_impressions_total",
    "Posts shown on pages built from a RANKED session",
    ["model", "arm"],
)
RANKED_DUPLICATES = Counter(
    "feed_ranked_page_duplicates_total",
    "feed_page_duplicates_total of pages built from a RANKED session (an invariant: 0)",
    ["model", "arm"],
)
RANKED_EMPTY = Counter(
    "feed_ranked_empty_pages_total",
    "feed_empty_pages_total of pages built from a RANKED session",
    ["model", "arm", "page"],
)


def count_ranked_page(
    ranking: SessionRanking | None, cursor: Cursor | None, shown: list[int], repeats: int
) -> None:
    """`count_page`'s figures again under the session's model version and arm (arm "none"
    without an experiment); nothing for a page not built from a session."""
    if ranking is None:
        return
    labels = (ranking.model or "none", ranking.arm or "none")
    RANKED_PAGES.labels(*labels).inc()
    if shown:
        RANKED_IMPRESSIONS.labels(*labels).inc(len(shown))
    else:
        RANKED_EMPTY.labels(*labels, "first" if cursor is None else "next").inc()
    duplicates = repeats + len(shown) - len(set(shown))
    if duplicates:
        RANKED_DUPLICATES.labels(*labels).inc(duplicates)


def already_served(
    rows: Sequence[tuple[FeedRow, Cursor]], earlier: Sequence[int], end: int | None = None
) -> int:
    """How many of `rows` are among `earlier[:end]` (ids an earlier page of the scroll
    covered). The page's ids are the small set: `earlier` is only walked (in C), neither
    copied nor hashed (a heavy viewer's session holds hundreds of ids)."""
    if not rows or not earlier or end == 0:
        return 0
    shown = {row.post_id for row, _ in rows}
    covered = shown.intersection(earlier if end is None else islice(earlier, end))
    if not covered:
        return 0
    return sum(1 for row, _ in rows if row.post_id in covered)
