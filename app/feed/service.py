"""The `feed` read path: candidates -> dedupe -> authoritative filter -> rank -> session
-> hydrate. Free of GraphQL types so benchmarks and tests drive it directly too.

A first page (no cursor) is also where the viewer is marked active (which rebuilds the
timeline of a user coming back; at most once an hour, app.users.activity) and where their
live "new posts" count restarts at zero. What it needs of other parts (activity, rebuilds,
queue lag, the live count) is handed in by the composition root, app.state.

A refresh with nothing new reuses the open session. A RANKED first page reads its
candidates (timeline, pulled authors, own posts) as always; when they are exactly the ones
the viewer's last session in this process was ranked from (`OpenSessions`: a 16-byte
signature of the ids), less than FEED_SESSION_REUSE_SECONDS ago, the page is answered from
that session (same order, same sessionId, same cursors; its lifetime restarts) instead of
filtering and ranking ~600 candidates and writing a new session. What keeps it correct:
- every shown id is still checked against the current graph, blocks, tombstones and
  visibility (`_from_session` runs the same SQL filter as a later page), so deletes, blocks
  and unfollows since the freeze apply, and the gaps they leave fill from the next positions;
- anything new changes the candidates, hence the signature: a post pushed into the timeline
  (also one older than its head, fanned out late), a pulled author's or the viewer's own
  post, a new follow (its author is pulled for RECENT_WINDOW), posts pulled under queue lag;
- a missing or unreadable session (expired, Redis trouble) means a fresh ranking, never an
  error; degraded reads are never reused nor remembered.
What it does not see for FEED_SESSION_REUSE_SECONDS (5 min): engagement that would reorder
the same posts, and a post among the same candidates that became visible again (made
public again); both are ranked in on the first refresh after that.

The new-post count is not reset on a reused page whose session's first page reset it: the
count holds posts delivered since that reset, and every such post would be a new candidate
(it would have changed the signature). "Count is zero" alone is not enough to skip: the
reset also moves the mark (`fur:{user}`) from which a later subscribe counts the posts that
arrived while the viewer was away, so skipping it on an unchanged zero count would announce
posts this very page showed.

PostgreSQL out of reach (`Unavailable` from app.db): a session page is answered from the
viewer's verified window (app.feed.verified: what the last session page's filter allowed,
one page read ahead) while that check is younger than FEED_AUTHZ_TTL_SECONDS, degraded;
everything else fails UNAVAILABLE (docs/decisions/0019-postgres-outage.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from array import array
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import chain, islice
from typing import Any, Protocol, TypeVar, cast

from prometheus_client import Counter, Histogram
from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import FaultSwitches, Settings
from app.db.replica import REPLICA_STALE_ROWS, ReplicaRouter
from app.errors import CursorExpired, Unavailable
from app.feed import rows as sql
from app.feed.context_cache import ContextCache, ContextVersions, ModesEpoch, version_key
from app.feed.cursor import Cursor, Keyset, SessionPosition
from app.feed.hot_cache import CoalescingCache
from app.feed.impressions import UNREAD, ImpressionLog
from app.feed.modes import FeedMode
from app.feed.rows import (
    FeedPost,
    FeedRow,
    PageExtras,
    RankColumns,
    Reads,
    ViewerContext,
    read_sessions,
)
from app.feed.sessions import FeedSession, FeedSessionStore, OpenSessions, candidates_signature
from app.feed.verified import VerifiedPages, VerifiedWindow
from app.observability.metrics import (
    FEED_CACHE,
    FEED_CANDIDATES,
    FEED_CURSOR_EXPIRED,
    FEED_DEDUPED,
    FEED_DEGRADED,
    FEED_EMPTY_PAGES,
    FEED_FILTERED,
    FEED_HYDRATION_BATCH,
    FEED_PAGE_DUPLICATES,
    FEED_PULL_SOURCE,
    FEED_STAGE,
)
from app.posts.ids import created_ms
from app.posts.queries import author_posts
from app.ranking.scoring import RankingTimeout, rank_columns
from app.timelines.store import TimelineStore
from app.users.activity import Activity
from app.users.reads import ReadCounter

log = logging.getLogger("app.feed")
T = TypeVar("T")
U = TypeVar("U")

MAX_ID = 2**63 - 1
PULL_PER_AUTHOR = 50  # newest posts taken from each pulled author
# Own posts are candidates as far as the feed is scrolled (read-your-writes, and SPEC: all of
# them): each candidate round reads the viewer's newest ones below its bound, up to its limit
# or OWN_PER_READ; when that many come back, the round's candidates stop at the oldest of them
# and the next round reads on below. (625 own ids per RANKED first page cost a heavy poster
# ~4 ms more per read: a heap fetch each.)
OWN_PER_READ = 100
RECENT_WINDOW = timedelta(minutes=10)  # follows/mode switches whose async work may still run
LAG_WINDOW = timedelta(minutes=5)  # under queue lag, followees' posts this recent are pulled
CANDIDATE_SLACK = 1.25  # candidates filtered per session slot (some will be invisible)
MAX_FALLBACKS = 4  # Postgres fallbacks for late Redis reads running at once, per process
PATIENCE = 8  # past MAX_FALLBACKS, or with a busy loop, a late read waits up to this many more
BUSY_SHARE = 0.2  # loop lag (timers run late) of this share of the source timeout = busy

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
_SESSION_NEW = FIRST_PAGE.labels("session", "new")
_SESSION_REUSED = FIRST_PAGE.labels("session", "reused")
_RESET_DONE = FIRST_PAGE.labels("reset", "done")
_RESET_SKIPPED = FIRST_PAGE.labels("reset", "skipped")
_CONTEXT_HIT = FEED_CACHE.labels("viewer_context", "hit")
_CONTEXT_MISS = FEED_CACHE.labels("viewer_context", "miss")
FEED_PATIENT = Counter(
    "feed_source_patient_total",
    "Extra source timeouts given to late Redis reads (busy loop or MAX_FALLBACKS), not degraded",
)


@dataclass
class FeedPage:
    rows: list[tuple[FeedRow, Cursor]]
    has_next: bool
    session_id: str | None
    degraded: bool
    first_page: bool = False
    reused: bool = False  # a first page answered from the viewer's open session
    # Posts on this page that an earlier page of the same scroll covered (see `_count_page`).
    repeats: int = 0
    # Read with the rows, so the Post/User fields need no DataLoader queries of their own.
    extras: PageExtras = field(default_factory=PageExtras)
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


_Timeline = tuple[list[int], bool, bool]  # (ids newest first, maybe more, degraded)


def _keyset_limit(first: int) -> int:
    """Candidates read per keyset round: room for some to be filtered out."""
    return first * 2 + 10


@dataclass
class _Candidates:
    ids: list[int]  # newest first, deduped
    maybe_more: bool  # a source was cut at its limit: older posts may exist
    degraded: bool
    signature: bytes | None = None  # candidates_signature(ids, maybe_more), when known


# Viewers whose last first-page merge a process remembers (oldest go first). A heavy viewer's
# entry holds ~30 KB (the timeline's 800 ids, ~2,600 merged ids): at most ~30 MB a process.
MERGES_MAX = 1_000


@dataclass(slots=True)
class _Merge:
    """A first page's candidate merge and what it was made from (`_Merges`)."""

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


class _Merges:
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


_STAGE_METRICS: dict[str, Histogram] = {}
_SOURCE_METRICS: dict[str, Counter] = {}


class _Stages:
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


def _count_source(source: str, n: int) -> None:
    metric = _SOURCE_METRICS.get(source)
    if metric is None:
        metric = _SOURCE_METRICS[source] = FEED_CANDIDATES.labels(source)
    metric.inc(n)


def _count_page(mode: FeedMode, cursor: Cursor | None, shown: list[int], repeats: int) -> None:
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


def _already_served(
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


async def _concurrently(
    first: Coroutine[object, object, T], second: Coroutine[object, object, U]
) -> tuple[T, U]:
    """Both at once, with one extra task (asyncio.gather makes two)."""
    task = asyncio.ensure_future(second)
    try:
        result = await first
    except BaseException:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise
    return result, await task


def _pulled_ids(pulled: dict[int, list[int]], before: int) -> list[int]:
    """The pulled authors' post ids below `before` (all of them on a first page), in C."""
    found = list(chain.from_iterable(pulled.values()))
    return found if before == MAX_ID else [p for p in found if p < before]


class _FirstReads:
    """A first page's Redis reads of the viewer's slot, sent as one pipeline when the
    timelines and the sessions share a client (one REDIS_URL, the default): the context's
    token (`fcv:`), the timeline's newest entries and, for RANKED, the open session renewed
    (GETEX) in case the candidates match it. Three round trips were ~10% of a heavy RANKED
    first page's API samples (py-spy: the socket writes alone), one is left.

    `error`: the pipeline failed as a whole (timeout, connection); each reader then takes
    its own failure path, as if its own command had failed."""

    __slots__ = ("error", "replies", "seen", "session_id")

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.replies: list[Any] = []
        self.session_id: str | None = None  # the open session read along, if any
        self.seen: int | None = None  # where the viewer's impressions' reply is, if read

    def reply(self, index: int) -> Any:
        """A command's reply as the pipeline left it (a failed command: its error)."""
        if self.error is not None:
            raise self.error
        return self.replies[index]


_NOT_READ = object()  # `_context`: the token was not read in advance


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a background task's failure as seen (its owner reads it, or has failed itself)."""
    if not task.cancelled():
        task.exception()


class _Reset:
    """A first page's live-count reset (the `reset_new_posts` call), started once the page's
    candidates are read so that it runs while the page is filtered, ranked and read instead
    of after it: the page shows what the candidates held, which is what the reset forgets."""

    def __init__(self, run: Callable[[int], Awaitable[None]], viewer_id: int) -> None:
        self._run, self._viewer_id = run, viewer_id
        self.task: asyncio.Future[None] | None = None

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.ensure_future(self._run(self._viewer_id))
            self.task.add_done_callback(_retrieve)

    async def settle(self) -> bool:
        """Wait for a started reset; True when it was done (False: not started, or Redis
        failed; other failures are raised)."""
        if self.task is None:
            return False
        await asyncio.wait([self.task])
        if self.task.cancelled():
            return False
        error = self.task.exception()
        if error is None:
            return True
        if isinstance(error, RedisError):
            return False
        raise error


class LoadTimeout(TimeoutError):
    """A source read still late after PATIENCE more timeouts, all with a busy event loop:
    degraded because of this process's load (metric reason "load_timeout")."""


class LoopLag:
    """How late this process's event loop lately ran its timers (s): the backlog of work
    every await waits behind. A timer is armed every PERIOD while reads ask (`recent`), and
    for two WINDOWs after the last one; nothing runs in an idle process."""

    PERIOD = 0.02
    WINDOW = 1.0

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._armed = False
        self._until = 0.0  # beat until then (loop time)
        self._worst = self._previous = 0.0  # per WINDOW: this one, the one before
        self._window_end = 0.0

    def recent(self) -> float:
        """The worst lateness over the last one to two WINDOWs; keeps the watch running."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._until = now + 2 * self.WINDOW
        if not self._armed or self._loop is not loop:
            self._loop, self._armed = loop, True
            self._worst = self._previous = 0.0
            loop.call_at(now + self.PERIOD, self._beat, loop, now + self.PERIOD)
        if now >= self._window_end + self.WINDOW:
            return 0.0  # no beat for two windows: stale figures
        return max(self._worst, self._previous)

    def _beat(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        if loop is not self._loop:
            return  # a watch armed on a loop since replaced (tests)
        now = loop.time()
        if now >= self._window_end:
            self._previous, self._worst = self._worst, 0.0
            self._window_end = now + self.WINDOW
        self._worst = max(self._worst, now - due)
        if now < self._until:
            loop.call_at(now + self.PERIOD, self._beat, loop, now + self.PERIOD)
        else:
            self._armed = False


class LagSignal(Protocol):
    """Whether fan-out runs late (app.fanout.lag.LagProbe): reads then pull recent posts."""

    async def lagging(self) -> bool: ...


class FeedService:
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
        replica: ReplicaRouter | None = None,
        faults: FaultSwitches | None = None,
    ) -> None:
        self.sessions = sessions
        # Test-only faults (app.config.FaultSwitches; all off unless the root hands them),
        # read at use: tests switch them live.
        self.faults = faults or FaultSwitches.model_construct()
        # Candidate-gathering reads counted for the fan-out control plane's read cost.
        self.read_counter = read_counter
        # The read path only SELECTs: autocommit Core (see app.feed.rows), same engine.
        self.reads = Reads(sessions.kw["bind"], skip_filter=self.faults.feed_fault_skip_filter)
        self.read_sessions = read_sessions(sessions)
        # Session pages' bodies and authors from a replica that keeps up (decision 0043).
        self.replica = replica
        self.replica_reads = Reads(replica.engine) if replica is not None else None
        self.store = store
        self.feed_sessions = feed_sessions
        self.lag = lag
        self.settings = settings
        self._rebuild = rebuild
        self.activity = activity
        self._reset_new_posts = reset_new_posts
        self._rebuilding: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._fallbacks = 0  # Postgres fallbacks for the timeline running now
        # Each pulled author's newest post ids, newest first.
        self.author_cache: CoalescingCache[int, list[int]] = CoalescingCache(ttl_seconds=2.0)
        # Per Redis source: past it the page is answered without that source.
        self.source_timeout = settings.feed_source_timeout_ms / 1000
        self.loop_lag = LoopLag()
        # Each viewer's last RANKED session and what it was ranked from (see module doc).
        self.open_sessions = OpenSessions(settings.feed_session_reuse_seconds)
        # Each viewer's last first-page merge of candidates, and its sources (`_Merges`).
        self.merges = _Merges()
        # First pages' viewer contexts while nothing they are read from changed (decision
        # 0047, app.feed.context_cache).
        self.context_cache = ContextCache(settings.feed_context_ttl_seconds)
        self.context_versions = ContextVersions(  # beside the sessions (same Redis role)
            feed_sessions.redis, settings.feed_context_ttl_seconds
        )
        self.modes_epoch = ModesEpoch(partial(sql.modes_epoch, self.reads))
        # What each viewer's last session page's filter allowed, for a PostgreSQL outage.
        self.verified = VerifiedPages(settings.feed_authz_ttl_seconds)
        # Served and reported posts, written in batches off the request path; RANKED puts
        # the ones a viewer has seen behind the unseen (app.feed.impressions).
        # One client for the timelines and the sessions: a first page's reads of both are
        # one pipeline (`_FirstReads`).
        self._one_redis = store.redis is feed_sessions.redis
        self.impressions = ImpressionLog(  # the sessions role, as the feed sessions
            feed_sessions.redis, settings.impressions_max, settings.impressions_ttl_seconds
        )

    # -- public ----------------------------------------------------------------------------

    async def context_changed(self, viewer_id: int) -> None:
        """The viewer followed, unfollowed, blocked, unblocked or posted (committed): their
        next first page reads its context afresh, in every process. Redis failing here
        leaves cached copies for at most FEED_CONTEXT_TTL_SECONDS (decision 0047)."""
        self.context_cache.forget(viewer_id)
        if self.context_cache.ttl > 0:
            with contextlib.suppress(RedisError, OSError):
                await self.context_versions.bump(viewer_id)

    async def page(
        self, viewer_id: int, mode: FeedMode, first: int, cursor: Cursor | None
    ) -> FeedPage:
        """One page; without a cursor, a fresh first page (see the module docstring)."""
        reset = None
        if cursor is None:
            await self.activity.touch_read(viewer_id)  # at most once an hour
            reset = _Reset(self._reset_new_posts, viewer_id)
        try:
            page = await self._read(viewer_id, mode, first, cursor, reset)
        except BaseException:
            if reset is not None:
                with contextlib.suppress(Exception):
                    await reset.settle()
            raise
        shown = [row.post_id for row, _ in page.rows]
        self.impressions.record(viewer_id, shown)  # no I/O
        _count_page(mode, cursor, shown, page.repeats)
        if reset is not None:
            # A fresh first page shows everything announced so far: the live count restarts,
            # unless nothing arrived since the reset after this session's own first page.
            # Started as soon as the candidates were read (`_Reset`), so usually done by now.
            session = page.session_id
            open_ = self.open_sessions.get(viewer_id, session) if page.reused else None
            if reset.task is None and open_ is not None and open_.reset_done:
                _RESET_SKIPPED.inc()
                return page
            reset.start()
            if not await reset.settle():
                return page  # Redis down: the page matters more; the next first page resets
            _RESET_DONE.inc()
            if session is not None:
                self.open_sessions.reset_done(viewer_id, session)
        return page

    async def _read(
        self,
        viewer_id: int,
        mode: FeedMode,
        first: int,
        cursor: Cursor | None,
        reset: _Reset | None = None,
    ) -> FeedPage:
        stages = _Stages()
        extras = PageExtras()
        if isinstance(cursor, SessionPosition):
            page = await self._session_page(viewer_id, cursor, first, stages, extras)
        else:
            self.read_counter.count()  # no I/O: pulled sources are read on these pages
            ranked_first = cursor is None and mode == FeedMode.RANKED
            before = cursor.post_id if isinstance(cursor, Keyset) else MAX_ID
            if isinstance(cursor, Keyset) and self.faults.feed_fault_repeat_post:
                before += 1  # test-only fault (app.config): an inclusive cursor repeats a post
            if ranked_first:
                limit = int(self.settings.feed_session_size * CANDIDATE_SLACK)
            else:
                limit = _keyset_limit(first)
            first_reads = None
            if cursor is None and self._one_redis and self.context_cache.ttl > 0:
                first_reads = await self._first_reads(viewer_id, limit, ranked_first)
            version: object = _NOT_READ
            if first_reads is not None:
                try:
                    token = first_reads.reply(0)
                    version = None if isinstance(token, Exception) else bytes(token or b"")
                except (RedisError, TimeoutError, OSError):
                    version = None
            # Independent sources, read at once: the viewer's graph (Postgres; affinity only
            # where ranking uses it) and the home timeline (Redis).
            context, timeline = await _concurrently(
                self._context(viewer_id, ranked_first, before, min(limit, OWN_PER_READ), version),
                self._timeline(viewer_id, before, limit, first_reads),
            )
            stages.done("context")
            if ranked_first:
                page = await self._ranked_first_page(
                    viewer_id, context, timeline, first, stages, extras, reset, first_reads
                )
            else:
                if reset is not None:
                    reset.start()  # the timeline is read: the page shows what it announced
                page = await self._keyset_page(
                    viewer_id, context, before, first, stages, extras, timeline
                )
                page.first_page = cursor is None
        page.extras = extras
        self._hydrate(page)
        stages.done("hydrate")
        return page

    # -- pages -----------------------------------------------------------------------------

    async def _ranked_first_page(
        self,
        viewer_id: int,
        context: ViewerContext,
        timeline: _Timeline,
        first: int,
        stages: _Stages,
        extras: PageExtras,
        reset: _Reset | None = None,
        first_reads: _FirstReads | None = None,
    ) -> FeedPage:
        size = self.settings.feed_session_size
        found = await self._candidates(
            viewer_id, context, MAX_ID, int(size * CANDIDATE_SLACK), timeline
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
        # The viewer's impressions come at once (Redis, while Postgres filters).
        if first_reads is not None and first_reads.seen is not None:
            visible = await sql.rank_rows(self.reads, viewer_id, found.ids)
            seen = self._seen_read(viewer_id, first_reads, first_reads.seen)
        else:
            visible, seen = await _concurrently(
                sql.rank_rows(self.reads, viewer_id, found.ids), self._seen(viewer_id)
            )
        FEED_FILTERED.inc(len(found.ids) - len(visible.post_ids))
        stages.done("filter")
        window = RankColumns(*(column[:size] for column in visible))  # newest first
        beyond = len(visible.post_ids) > size or found.maybe_more
        degraded = found.degraded
        try:
            order = rank_columns(
                *window,
                context.affinity,
                int(time.time() * 1000),
                self.settings.ranking_budget_ms / 1000,
                seen,
            )
        except RankingTimeout:
            FEED_DEGRADED.labels("ranking_timeout").inc()
            order, degraded = list(range(len(window.post_ids))), True  # already newest first
        stages.done("rank")
        ids = [window.post_ids[i] for i in order]
        oldest = window.post_ids[-1] if window.post_ids else None
        tail = (created_ms(oldest), oldest) if oldest is not None and beyond else None
        # The session is written while its first positions are read (Postgres): one round
        # trip of waiting instead of two. The page is only answered once the write is done,
        # so its cursors always find the session (decision 0047).
        frozen = FeedSession(self.feed_sessions.new_id(), ids, tail)
        write = asyncio.ensure_future(
            self.feed_sessions.create(viewer_id, ids, tail, frozen.session_id)
        )
        write.add_done_callback(_retrieve)
        try:
            page = await self._from_session(viewer_id, frozen, 0, first, stages, extras, False)
        finally:
            # Waited for even when the page failed: a cancelled command costs a connection.
            await asyncio.wait([write])
        try:
            write.result()
            stages.done("session")
        except RedisError:
            # No session store: serve the freshest window as a keyset feed instead.
            FEED_DEGRADED.labels("session_store").inc()
            newest = sorted(ids, reverse=True)[: first + 5]
            rows = await self._filter(viewer_id, newest, extras)
            shown = [rows[i] for i in newest if i in rows][:first]
            return FeedPage(
                [(r, Keyset(r.created_ms, r.post_id)) for r in shown],
                len(window.post_ids) > first or beyond,
                None,
                True,
                first_page=True,
            )
        _SESSION_NEW.inc()
        if signature is not None and not degraded and self.open_sessions.max_age > 0:
            self.open_sessions.remember(viewer_id, frozen.session_id, signature)
        page.degraded, page.first_page = degraded, True
        return page

    async def _reuse(
        self,
        viewer_id: int,
        signature: bytes,
        first: int,
        stages: _Stages,
        extras: PageExtras,
        reset: _Reset | None = None,
        first_reads: _FirstReads | None = None,
    ) -> FeedPage | None:
        """The first page from the viewer's open session, if it was ranked from these very
        candidates (see the module docstring); None: rank afresh. `first_reads` may hold the
        session already, renewed with the page's first reads."""
        open_ = self.open_sessions.matching(viewer_id, signature)
        if open_ is None:
            return None
        if reset is not None and not open_.reset_done:
            reset.start()
        try:
            if first_reads is not None and first_reads.session_id == open_.session_id:
                frozen = self.feed_sessions.decode(open_.session_id, first_reads.reply(2))
            else:
                frozen = await self.feed_sessions.renew(viewer_id, open_.session_id)
        except (RedisError, TimeoutError, OSError):
            frozen = None
        if frozen is None:  # expired or lost: a new ranking, as if never opened
            self.open_sessions.forget(viewer_id)
            return None
        stages.done("session")
        _SESSION_REUSED.inc()
        page = await self._from_session(viewer_id, frozen, 0, first, stages, extras, False)
        page.first_page = page.reused = True
        return page

    async def _session_page(
        self,
        viewer_id: int,
        cursor: SessionPosition,
        first: int,
        stages: _Stages,
        extras: PageExtras,
    ) -> FeedPage:
        try:
            frozen = await self.feed_sessions.load(viewer_id, cursor.session_id)
        except RedisError:
            frozen = None
        if frozen is None:
            FEED_CURSOR_EXPIRED.inc()
            raise CursorExpired("This feed session has expired; load the feed again from the top.")
        stages.done("session")
        try:
            return await self._from_session(
                viewer_id, frozen, cursor.position, first, stages, extras, True
            )
        except Unavailable:
            page = self._verified_page(viewer_id, frozen, cursor.position, first, extras)
            if page is None:
                raise
            FEED_DEGRADED.labels("postgres_down").inc()
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
        repeats = _already_served(taken, frozen.ids, position)
        return FeedPage(taken, has_next, frozen.session_id, True, repeats=repeats)

    async def _from_session(
        self,
        viewer_id: int,
        frozen: FeedSession,
        position: int,
        first: int,
        stages: _Stages,
        extras: PageExtras,
        continue_below: bool,
    ) -> FeedPage:
        """`first` visible posts from `position` of a frozen session; past its end (if
        `continue_below`), newest first below its oldest candidate."""
        taken: list[tuple[FeedRow, Cursor]] = []
        ids = frozen.ids
        # Every id is re-checked now: deletes, blocks and unfollows apply at once, and the
        # gaps they leave are filled from the following positions. The check reads one page
        # ahead, kept as the viewer's verified window for a PostgreSQL outage (decision 0019).
        ahead = first if self.verified.ttl > 0 else 0
        checked: list[tuple[int, FeedRow]] = []
        start, at = position, time.monotonic()
        while len(taken) < first and position < len(ids):
            # The read-ahead doubles as the slack for ids that turn out hidden.
            chunk = ids[position : position + first - len(taken) + max(5, ahead)]
            visible = await self._session_filter(viewer_id, chunk, extras)
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
        repeats = _already_served(taken, ids, start)
        if position < len(ids):
            return FeedPage(taken, True, frozen.session_id, False, repeats=repeats)
        if frozen.tail is None or len(taken) == first or not continue_below:
            return FeedPage(
                taken, frozen.tail is not None, frozen.session_id, False, repeats=repeats
            )
        # The frozen window is used up: continue below its oldest post, newest first.
        left = first - len(taken)
        own_limit = min(_keyset_limit(left), OWN_PER_READ)
        context = await self._context(viewer_id, False, frozen.tail[1], own_limit)
        rest = await self._keyset_page(
            viewer_id, context, frozen.tail[1], first - len(taken), stages, extras
        )
        # Below the window: none of the window's ids, served on this page or before it.
        repeats += _already_served(rest.rows, ids)
        return FeedPage(
            taken + rest.rows, rest.has_next, frozen.session_id, rest.degraded, repeats=repeats
        )

    async def _keyset_page(
        self,
        viewer_id: int,
        context: ViewerContext,
        before: int,
        first: int,
        stages: _Stages,
        extras: PageExtras,
        timeline: _Timeline | None = None,
    ) -> FeedPage:
        """Newest first below `before`; `timeline` is the first round's timeline, if read."""
        taken: list[tuple[FeedRow, Cursor]] = []
        degraded = False
        bound = before
        for _ in range(4):
            found = await self._candidates(
                viewer_id, context, bound, _keyset_limit(first), timeline
            )
            timeline = None  # later rounds read below a new bound
            degraded = degraded or found.degraded
            # Candidates are newest first: the newest `first - taken + 1` visible ones decide
            # both the page and whether there is more.
            visible = await self._filter(viewer_id, found.ids, extras, first - len(taken) + 1)
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

    # -- stages ----------------------------------------------------------------------------

    async def _context(
        self,
        viewer_id: int,
        affinity: bool,
        before: int,
        limit: int,
        version: object = _NOT_READ,
    ) -> ViewerContext:
        """Graph, affinity, and the viewer's newest `limit` posts below `before`; a first
        page's from the context cache while its token holds (app.feed.context_cache).
        `version`: the token as read in advance (None: it could not be), or `_NOT_READ`."""
        recent = datetime.now(UTC) - RECENT_WINDOW
        cache = self.context_cache
        if before != MAX_ID or cache.ttl <= 0:
            return await sql.viewer_context(self.reads, viewer_id, recent, limit, affinity, before)
        # The token is read before the context is: a change committed after the context was
        # read has replaced the token by then (see the cache's module doc).
        if version is _NOT_READ:
            try:
                version = await self._in_time(self.context_versions.current(viewer_id))
            except (RedisError, TimeoutError, OSError):
                version = None
        if not isinstance(version, bytes):
            return await sql.viewer_context(self.reads, viewer_id, recent, limit, affinity, before)
        token = (version, await self.modes_epoch.current(), affinity, limit)
        context = cache.get(viewer_id, token)
        if context is not None:
            _CONTEXT_HIT.inc()
            return context
        _CONTEXT_MISS.inc()
        context = await sql.viewer_context(self.reads, viewer_id, recent, limit, affinity, before)
        cache.put(viewer_id, token, context)
        return context

    async def _candidates(
        self,
        viewer_id: int,
        context: ViewerContext,
        before: int,
        limit: int,
        timeline: _Timeline | None = None,
    ) -> _Candidates:
        """Timeline + pulled authors + own posts (+ recent followee posts under lag).

        The pulled authors and the lag probe are in-process caches that almost always answer
        without I/O, so they are awaited in turn rather than as gathered tasks.
        """
        read: _Timeline
        if timeline is None:
            read, (pulled, pulled_ok) = await _concurrently(
                self._timeline(viewer_id, before, limit), self._pulled(context.pull_authors)
            )
        else:
            read, (pulled, pulled_ok) = timeline, await self._pulled(context.pull_authors)
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
                return _Candidates(merge.ordered.tolist(), merge.maybe_more, False, merge.signature)
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
            return _Candidates(ordered, tl_full or cut, degraded)
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
        return _Candidates(ordered, tl_full or cut, False, signature)

    async def _timeline(
        self, viewer_id: int, before: int, limit: int, first_reads: _FirstReads | None = None
    ) -> _Timeline:
        """(ids, maybe more, degraded). Missing timeline or Redis trouble: Postgres answers.
        `first_reads`: the newest entries already read (a first page's pipeline)."""
        entries: list[int] | None
        try:
            if first_reads is not None:
                entries = self.store.latest_ids_reply(first_reads.reply(1), limit)
            elif before == MAX_ID:
                entries = await self._in_time(self.store.latest_ids_or_none(viewer_id, limit))
            else:
                older = await self._in_time(
                    self.store.before(viewer_id, created_ms(before), before, limit)
                )
                entries = [p for p, _ in older]
            if before != MAX_ID and not entries and not await self.store.exists(viewer_id):
                entries = None
            reason = "timeline_missing"
        except LoadTimeout:
            entries, reason = None, "load_timeout"
        except TimeoutError:
            entries, reason = None, "redis_timeout"
        except (RedisError, OSError):
            entries, reason = None, "redis_down"
        if entries is not None:
            return entries, len(entries) >= limit, False
        FEED_DEGRADED.labels(reason).inc()
        if reason == "timeline_missing":
            self._schedule_rebuild(viewer_id)
        self._fallbacks += 1
        try:
            ids = await sql.followee_posts_before(self.reads, viewer_id, before, limit)
        finally:
            self._fallbacks -= 1
        return ids, len(ids) >= limit, True

    async def _first_reads(self, viewer_id: int, limit: int, ranked: bool) -> _FirstReads:
        """The context token, the timeline's newest `limit` entries and (RANKED, when the
        viewer has an open session here) that session renewed: one pipeline (`_FirstReads`)."""
        reads = _FirstReads()
        pipe = self.feed_sessions.redis.pipeline(transaction=False)
        pipe.execute_command("GET", version_key(viewer_id))
        pipe.execute_command(*self.store.latest_ids_command(viewer_id, limit))
        open_ = self.open_sessions.peek(viewer_id) if ranked else None
        if open_ is not None:
            # Renewed before the candidates say whether it is reused: a session that is
            # not reused only lives on for its TTL, as the sessions past the cap do.
            reads.session_id = open_.session_id
            pipe.execute_command(*self.feed_sessions.renew_command(viewer_id, open_.session_id))
        elif ranked and self.impressions.enabled:
            # No session to reuse: this page ranks, and ranking reads the impressions.
            reads.seen = 2
            pipe.execute_command(*self.impressions.seen_command(viewer_id))
        try:
            reads.replies = await self._in_time(pipe.execute(raise_on_error=False))
        except (RedisError, TimeoutError, OSError) as exc:
            reads.error = exc
        return reads

    async def _in_time(self, read: Coroutine[object, object, T]) -> T:
        """A Redis read within FEED_SOURCE_TIMEOUT_MS, TimeoutError past it (the caller then
        answers without it, degraded) - unless the process is the likelier culprit: its
        event loop ran timers late lately (by BUSY_SHARE of the timeout, `LoopLag`), or
        MAX_FALLBACKS Postgres fallbacks already run in it. Then the read gets another
        timeout, and so on while that holds, PATIENCE more at most.

        Why: the timeout runs on this process's event loop, so when the process is saturated
        it measures the loop's backlog, not Redis. Falling back then adds an expensive
        Postgres query per read to a process that is already behind (measured: ~10% of the
        reads at 50 concurrent clients on 2 cores went degraded and throughput dropped;
        MAX_FALLBACKS alone still left 1-4%, and 8-40% on a machine shared with other work).
        A real outage still degrades soon: a dead Redis fails fast with connection errors,
        a hung one behind a responsive loop after one timeout, behind a busy loop after at
        most PATIENCE + 1. Admission control (app.api.transports.admission) bounds the loop's
        backlog, so the busy case stays short. The read runs as its own task, so waiting on
        does not cancel it (redis-py drops a connection when a command is cancelled
        mid-flight).
        """
        lag = self.loop_lag
        lag.recent()  # keeps the watch running while reads come
        task = asyncio.ensure_future(read)
        late = 0
        try:
            while True:
                try:
                    async with asyncio.timeout(self.source_timeout):
                        return await asyncio.shield(task)
                except TimeoutError:
                    busy = lag.recent() >= self.source_timeout * BUSY_SHARE
                    if late == PATIENCE:
                        raise (LoadTimeout() if busy else TimeoutError()) from None
                    if not busy and self._fallbacks < MAX_FALLBACKS:
                        raise
                    late += 1
                    FEED_PATIENT.inc()
        finally:
            task.cancel()  # a no-op once done

    async def _seen(self, viewer_id: int) -> set[int]:
        """Posts the viewer had impressions of; none (no demotion) when Redis cannot say."""
        try:
            return await self._in_time(self.impressions.seen(viewer_id))
        except (RedisError, TimeoutError, OSError):
            UNREAD.inc()
            return set()

    def _seen_read(self, viewer_id: int, first_reads: _FirstReads, index: int) -> set[int]:
        """`_seen` from a first page's pipelined reads."""
        try:
            return self.impressions.seen_reply(viewer_id, first_reads.reply(index))
        except (RedisError, TimeoutError, OSError):
            UNREAD.inc()
            return set()

    async def _pulled(self, authors: Sequence[int]) -> tuple[dict[int, list[int]], bool]:
        """The pulled authors' newest posts, and False when they could not be read in time
        (the page then goes without them, degraded)."""
        if not authors:
            return {}, True
        started = time.perf_counter()
        try:
            found, misses = await self._in_time(
                self.author_cache.get_many_counted(list(authors), self._load_author_indexes)
            )
        except (RedisError, TimeoutError, OSError) as exc:
            FEED_DEGRADED.labels(
                "load_timeout" if isinstance(exc, LoadTimeout) else "pull_source"
            ).inc()
            return {}, False
        finally:  # a failed gathering too: how long the page waited for it
            FEED_PULL_SOURCE.observe(time.perf_counter() - started)
        # Per call: the cache's shared totals also move with concurrent readers.
        FEED_CACHE.labels("author_index", "hit").inc(len(authors) - misses)
        FEED_CACHE.labels("author_index", "miss").inc(misses)
        return found, True

    async def _load_author_indexes(self, authors: list[int]) -> dict[int, list[int]]:
        found = await self.store.author_latest_ids_many_or_none(authors, PULL_PER_AUTHOR)
        missing = [a for a, ids in found.items() if ids is None]
        result: dict[int, list[int]] = {}
        last = self.author_cache.last
        for author, ids in found.items():
            if ids is not None:
                # Unchanged since the last load: the same list object, so a viewer's merge
                # of them is found again (`_Merges` compares the lists by identity).
                held = last(author)
                result[author] = held if held is not None and held == ids else ids
        if missing:
            # A lost index is rebuilt from Postgres (bounded) and served meanwhile.
            async with self.read_sessions() as session:
                for author_id in missing:
                    entries = await author_posts(session, author_id, self.settings.author_posts_max)
                    await self.store.rebuild_author(author_id, entries)
                    result[author_id] = [p for p, _ in entries[:PULL_PER_AUTHOR]]
        return result

    async def _lagging(self) -> bool:
        try:
            return await self.lag.lagging()
        except RedisError:
            return False

    async def _filter(
        self, viewer_id: int, ids: Sequence[int], extras: PageExtras, newest: int | None = None
    ) -> dict[int, FeedRow]:
        """The visible rows among ids (the `newest` ones only, for id-ordered candidates)."""
        visible = await sql.page_rows(self.reads, viewer_id, ids, extras, newest)
        if newest is not None and len(visible) == newest:
            # Cut by the limit: only candidates down to the oldest row returned were judged.
            oldest = min(visible)
            judged = sum(1 for i in ids if i >= oldest)
        else:
            judged = len(ids)
        FEED_FILTERED.inc(judged - len(visible))
        return visible

    async def _session_filter(
        self, viewer_id: int, ids: Sequence[int], extras: PageExtras
    ) -> dict[int, FeedRow]:
        """`_filter` for a frozen session's positions. With a replica (decision 0043): the
        decision, counts and the viewer's like from the primary, the rest of each row from
        the replica while it keeps up; rows it has older than the primary's version (or not
        yet), and the viewer's own posts, from the primary."""
        replica, replica_reads = self.replica, self.replica_reads
        if replica is None or replica_reads is None:
            return await self._filter(viewer_id, ids, extras)
        allowed = await sql.authorized(self.reads, viewer_id, ids)
        FEED_FILTERED.inc(len(ids) - len(allowed))
        if not allowed:
            return {}
        wanted = [p for p, a in allowed.items() if a.author_id != viewer_id]
        own = [p for p, a in allowed.items() if a.author_id == viewer_id]
        hydrated = await replica.read(
            "feed_session_page",
            partial(sql.hydrate, replica_reads, wanted),
            partial(sql.hydrate, self.reads, wanted),
        )
        behind = [p for p in wanted if p not in hydrated or hydrated[p][1] != allowed[p].version]
        stale = own + behind
        if stale:
            REPLICA_STALE_ROWS.inc(len(behind))
            hydrated.update(await sql.hydrate(self.reads, stale))
        return sql.assemble(allowed, hydrated, extras)

    def _hydrate(self, page: FeedPage) -> None:
        """The page's posts: bodies, authors and likes all came with the rows (one query);
        FeedPage.posts makes the Post type's view of them only for a reader that wants it."""
        FEED_HYDRATION_BATCH.observe(len(page.rows))

    def _schedule_rebuild(self, viewer_id: int) -> None:
        """Rebuild a missing timeline in the background; the current read uses Postgres."""
        if viewer_id in self._rebuilding:
            return
        self._rebuilding.add(viewer_id)

        async def run() -> None:
            try:
                await self._rebuild(viewer_id)
            except Exception:  # a failed rebuild is retried by the next read
                log.exception("timeline rebuild for %s failed", viewer_id)
            finally:
                self._rebuilding.discard(viewer_id)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)  # keep a reference until done, or it may be collected
        task.add_done_callback(self._tasks.discard)
