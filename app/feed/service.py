"""The `feed` read path's façade: candidates -> dedupe -> authoritative filter -> rank ->
session -> hydrate. Free of GraphQL types so benchmarks and tests drive it directly too.

`FeedService` is what the API calls: it builds the stages (one module each, below) and
answers a page; what a page is made of is theirs:
- reader.py: which page a request is (session cursor, RANKED first page, keyset) and the
  reads every page starts with (first_reads.py: a first page's one Redis pipeline);
- candidate sources: home_timeline.py (Redis, PostgreSQL fallback, rebuilds), pulled.py
  (PULL-mode authors, their cache), the viewer's own posts and, under fan-out lag, recent
  followee posts; candidates.py merges them (the merge memo beside it);
- context_cache.py: the viewer's graph and affinity, cached between first pages;
- filter.py: the authoritative filter and hydration (rows.py has the SQL);
- rank.py: the ranking stage (app.ranking.scoring) and the impressions it reads;
- first_page.py (RANKED first pages, session reuse), session_pages.py (pages of a frozen
  session, verified windows), keyset.py (newest-first pages); page.py: the page and its
  figures; reset.py: the live count's reset; deadline.py: Redis reads within
  FEED_SOURCE_TIMEOUT_MS; constants.py: the fixed numbers.

A first page (no cursor) is also where the viewer is marked active (which rebuilds the
timeline of a user coming back; at most once an hour, app.users.activity) and where their
live "new posts" count restarts at zero. What it needs of other parts (activity, rebuilds,
queue lag, the live count) is handed in by the composition root, app.state.

Where each rule is told: session reuse (a refresh with nothing new) in first_page.py, the
count reset in reset.py, what a page may serve while PostgreSQL is away in session_pages.py."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import FaultSwitches, Settings
from app.db.replica import ReplicaSet
from app.db.watermarks import Watermarks
from app.engagement.writer import EngagementLog
from app.feed.candidates import CandidateSources, LagSignal
from app.feed.context_cache import ContextCache, ViewerContexts
from app.feed.cursor import Cursor, SessionPosition
from app.feed.deadline import SourceDeadline
from app.feed.filter import PageFilter
from app.feed.first_page import RankedFirstPages
from app.feed.first_reads import FirstReadsPipeline
from app.feed.home_timeline import HomeTimeline
from app.feed.hot_cache import CoalescingCache
from app.feed.impressions import ImpressionLog
from app.feed.keyset import KeysetPages
from app.feed.modes import FeedMode
from app.feed.page import FeedPage, count_page, count_ranked_page
from app.feed.pulled import PulledAuthors
from app.feed.rank import RankStage
from app.feed.reader import PageReader
from app.feed.recommended import RecommendationSource
from app.feed.reset import CountReset
from app.feed.rows import Reads, read_sessions
from app.feed.session_pages import SessionPages
from app.feed.sessions import FeedSessionStore, OpenSessions
from app.feed.sources import SourceBudgets
from app.feed.verified import VerifiedPages
from app.ranking.features import NegativeFeedback, SourceQuality
from app.ranking.registry import ModelRegistry, load_registry
from app.timelines.store import TimelineStore
from app.users.activity import Activity
from app.users.reads import ReadCounter


class FeedService:
    """The read path as the API sees it: a page, and "the viewer's context changed"."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        store: TimelineStore,
        feed_sessions: FeedSessionStore,
        lag: LagSignal,
        settings: Settings,
        rebuild: Callable[[int], Awaitable[int]],
        activity: Activity,
        reset_new_posts: Callable[[int], Awaitable[None]],
        read_counter: ReadCounter,
        replicas: ReplicaSet | None = None,
        marks: Watermarks | None = None,
        faults: FaultSwitches | None = None,
        engagement: EngagementLog | None = None,
        registry: ModelRegistry | None = None,
        quality: SourceQuality | None = None,
        feedback: NegativeFeedback | None = None,
    ) -> None:
        self.settings = settings
        self.engagement = engagement  # the engagement log: each page served (app.engagement)
        self.activity = activity
        self.feed_sessions = feed_sessions
        self.read_counter = read_counter
        self._reset_new_posts = reset_new_posts
        # The read path only SELECTs: autocommit Core (see app.feed.rows), same engine.
        # Test-only faults (app.config.FaultSwitches; all off unless the root hands them),
        # read at use: tests switch them live.
        self.faults = faults or FaultSwitches.model_construct()
        self.reads = Reads(sessions.kw["bind"], skip_filter=self.faults.feed_fault_skip_filter)
        self.deadline = SourceDeadline(settings.feed_source_timeout_ms / 1000)
        # Served and reported posts, written in batches off the request path; RANKED puts
        # the ones a viewer has seen behind the unseen (app.feed.impressions).
        self.impressions = ImpressionLog(  # the sessions role, as the feed sessions
            feed_sessions.redis, settings.impressions_max, settings.impressions_ttl_seconds
        )
        self.open_sessions = OpenSessions(settings.feed_session_reuse_seconds)
        # Pages filtered on a replica proven current for them (decision 0086).
        filter_ = PageFilter(self.reads, replicas, marks)
        self.contexts = ViewerContexts(
            self.reads,
            feed_sessions.redis,
            settings.feed_context_ttl_seconds,
            self.deadline,
            filter_,
        )
        pulled = PulledAuthors(store, read_sessions(sessions), settings, self.deadline)
        self.author_cache: CoalescingCache[int, list[int]] = pulled.cache
        timeline = HomeTimeline(store, self.reads, self.deadline, rebuild)
        # Every candidate source within its budget (app.feed.sources); the recommendation
        # source's per-viewer cache beside it (app.feed.recommended).
        self.recommendations = RecommendationSource(self.reads, settings, filter_)
        candidates = CandidateSources(
            timeline, pulled, self.reads, lag, SourceBudgets(settings), self.recommendations
        )
        keyset = KeysetPages(candidates, filter_)
        session_pages = SessionPages(
            feed_sessions, filter_, self.contexts, keyset, settings.feed_authz_ttl_seconds
        )
        self.verified: VerifiedPages = session_pages.verified
        # The served ranking models, loaded and checked now: a missing or corrupt model
        # file stops the start-up (SettingsError, app.ranking.registry).
        self.rank = rank = RankStage(
            self.reads,
            self.impressions,
            settings,
            self.deadline,
            registry or load_registry(settings),
            quality,
            feedback,
            filter_,
        )
        first_reads = FirstReadsPipeline(
            store, feed_sessions, self.open_sessions, self.impressions, self.deadline
        )
        self.reader: PageReader = PageReader(
            settings,
            self.faults,
            self.contexts,
            candidates,
            first_reads,
            RankedFirstPages(
                settings,
                candidates,
                rank,
                filter_,
                feed_sessions,
                self.open_sessions,
                session_pages,
            ),
            keyset,
            session_pages,
            read_counter,
        )

    @property
    def context_cache(self) -> ContextCache:
        """First pages' viewer contexts (decision 0047, app.feed.context_cache)."""
        return self.contexts.cache

    async def context_changed(self, viewer_id: int) -> None:
        """The viewer followed, unfollowed, blocked, unblocked or posted (committed): their
        next first page reads its context afresh, in every process."""
        await self.contexts.changed(viewer_id)

    async def page(
        self,
        viewer_id: int,
        mode: FeedMode,
        first: int,
        cursor: Cursor | None,
        why: bool = False,
    ) -> FeedPage:
        """One page; without a cursor, a fresh first page (see the module docstring).
        `why`: read why each shown recommendation is (one query; only for a reader that
        shows it: app.feed.recommended)."""
        started = time.perf_counter()
        reset = None
        if cursor is None:
            await self.activity.touch_read(viewer_id)  # at most once an hour
            reset = CountReset(self._reset_new_posts, viewer_id)
        try:
            page = await self.reader.read_page(viewer_id, mode, first, cursor, reset, why)
        except BaseException:
            if reset is not None:
                await reset.abandon()
            raise
        shown = [row.post_id for row, _ in page.rows]
        self.impressions.record(viewer_id, shown)  # no I/O
        duplicates = count_page(mode, cursor, shown, page.repeats)
        count_ranked_page(page.ranking, cursor, shown, page.repeats)
        if self.engagement is not None:  # no I/O either: IMPRESSION rows and a PAGE row
            ranking = page.ranking
            self.engagement.page_served(
                viewer_id,
                [
                    (row.post_id, row.author_id, _position(c, i))
                    for i, (row, c) in enumerate(page.rows)
                ],
                session_id=page.session_id,
                duplicates=duplicates,
                cost_ms=(time.perf_counter() - started) * 1000,
                position=0 if cursor is None else _position(cursor, None, after=True),
                model_version=(ranking.model or None) if ranking is not None else None,
                arm=(ranking.arm or None) if ranking is not None else None,
                reasons=[
                    _reason(row.post_id, row.author_id, viewer_id, page) for row, _ in page.rows
                ],
            )
        if reset is not None:
            await reset.finish(page, self.open_sessions)
        return page


def _position(cursor: Cursor, index: int | None, after: bool = False) -> int | None:
    """A served post's 0-based place in its session (a row's cursor points past it; a
    request's `after` cursor at the page's first), else its index on a keyset page."""
    if isinstance(cursor, SessionPosition):
        return cursor.position if after else cursor.position - 1
    return index


def _reason(post_id: int, author_id: int, viewer_id: int, page: FeedPage) -> str:
    """A shown post's source as its edge names it (FeedReason), for the engagement log."""
    if author_id == viewer_id:
        return "OWN"
    return "RECOMMENDED" if post_id in page.recommended else "FOLLOWED"
