"""The viewer's context (pull sources, own newest posts, affinity) kept in process between a
viewer's first pages while nothing it is read from changed (decision 0047).

A first page reads the context from PostgreSQL (app.feed.rows.viewer_context): one query of
three to five index scans, about a third of a CHRONOLOGICAL first page's database work. What
it depends on, and what tells a cached copy is out of date:
- the viewer's own actions: a follow (the new followee is pulled at once), a post (shown at
  once: read-your-writes), and, for symmetry, unfollows and blocks either way. Each writes a
  fresh random token to `fcv:{<viewer>}` after its commit (`ContextVersions.bump`); a cached
  context is only used under the token it was read under, and the token is read BEFORE the
  context query is sent, so a context read before a change never sits under the token after it;
- pull-mode switches of any author (a switch to PULL: that author's posts stop reaching
  timelines): `ModesEpoch`, the count and newest switch time of the pull-mode users, read
  from PostgreSQL at most once per `EPOCH_SECONDS` per process. A switch is seen within that
  second, well inside the 5 s freshness budget of the SPEC;
- the viewer's likes and comments (affinity, RANKED only): ranking weights, not visibility;
  they may be up to FEED_CONTEXT_TTL_SECONDS old.
Never authorization: every id a page shows still passes the SQL filter against the current
graph, blocks, tombstones and visibility. A cached pull list that holds a since-unfollowed
or blocked author only proposes candidates the filter then drops.

When Redis cannot say (no token), the context is read from PostgreSQL and not cached.
`ViewerContexts` is the read path's stage that reads a context through this cache.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import cast

from redis.exceptions import RedisError

from app.feed import rows as sql
from app.feed.constants import CONTEXT_CACHE_MAX, EPOCH_SECONDS, MAX_ID, RECENT_WINDOW
from app.feed.deadline import SourceDeadline
from app.feed.filter import CONTEXT_USE, PageFilter
from app.feed.rows import Reads, ViewerContext
from app.observability.metrics import FEED_CACHE
from app.redis_scripts import AnyRedis

_CONTEXT_HIT = FEED_CACHE.labels("viewer_context", "hit")
_CONTEXT_MISS = FEED_CACHE.labels("viewer_context", "miss")
NOT_READ = object()  # `ViewerContexts.read_context`: the token was not read in advance


def version_key(viewer_id: int) -> str:
    """`fcv:{<viewer>}`: the token of the viewer's context (same slot as their timeline)."""
    return f"fcv:{{{int(viewer_id)}}}"


class ContextVersions:
    """The per-viewer tokens in Redis. A token is random, not a counter: a key that expired
    and was written again can never repeat a token some process cached a context under."""

    def __init__(self, redis: AnyRedis, ttl_seconds: int) -> None:
        self.redis = redis
        # Longer than any cached entry lives: an expired key (token b"") then only matches
        # entries cached while it was missing, which are gone by the time it could go
        # missing again after a bump.
        self.key_ttl = max(60, 2 * ttl_seconds)

    async def current(self, viewer_id: int) -> bytes:
        raw = await self.redis.get(version_key(viewer_id))
        return b"" if raw is None else bytes(cast(bytes, raw))

    async def bump(self, viewer_id: int) -> None:
        """The viewer's context changed (called after the change is committed)."""
        await self.redis.set(version_key(viewer_id), secrets.token_bytes(8), ex=self.key_ttl)


class ModesEpoch:
    """A fingerprint of the pull-mode users, refreshed at most every EPOCH_SECONDS."""

    def __init__(self, read: Callable[[], Awaitable[tuple[object, ...]]]) -> None:
        self._read = read
        self._value: tuple[object, ...] | None = None
        self._checked = 0.0

    async def current(self) -> tuple[object, ...]:
        now = time.monotonic()
        if self._value is None or now - self._checked >= EPOCH_SECONDS:
            self._checked = now
            self._value = await self._read()
        return self._value


@dataclass(slots=True)
class _Entry:
    token: tuple[bytes, tuple[object, ...], bool, int]  # version, epoch, affinity, own limit
    context: ViewerContext
    expires: float


class ContextCache:
    """viewer -> their first pages' contexts (one per affinity flag), each under the token it
    was read under; bounded, every entry lives `ttl_seconds` at most."""

    def __init__(self, ttl_seconds: float, max_entries: int = CONTEXT_CACHE_MAX) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._entries: dict[tuple[int, bool], _Entry] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(
        self, viewer_id: int, token: tuple[bytes, tuple[object, ...], bool, int]
    ) -> ViewerContext | None:
        entry = self._entries.get((viewer_id, token[2]))
        if entry is None or entry.token != token or entry.expires <= time.monotonic():
            self.misses += 1
            return None
        self.hits += 1
        return entry.context

    def put(
        self,
        viewer_id: int,
        token: tuple[bytes, tuple[object, ...], bool, int],
        context: ViewerContext,
    ) -> None:
        key = (viewer_id, token[2])
        self._entries.pop(key, None)
        self._entries[key] = _Entry(token, context, time.monotonic() + self.ttl)
        while len(self._entries) > self.max_entries:
            del self._entries[next(iter(self._entries))]

    def forget(self, viewer_id: int) -> None:
        for affinity in (False, True):
            self._entries.pop((viewer_id, affinity), None)

    def clear(self) -> None:
        self._entries.clear()


class ViewerContexts:
    """The read path's context stage: a viewer's graph, affinity and newest own posts, a
    first page's from the `ContextCache` while its token holds."""

    def __init__(
        self,
        reads: Reads,
        redis: AnyRedis,
        ttl_seconds: int,
        deadline: SourceDeadline,
        filter_: PageFilter | None = None,
    ) -> None:
        self.reads = reads
        # The context on a replica that has replayed the viewer's own marks (decision 0086):
        # their follows, blocks, posts and feedback are what it is read from.
        self.filter = filter_ or PageFilter(reads)
        self.deadline = deadline
        # First pages' viewer contexts while nothing they are read from changed (decision
        # 0047).
        self.cache = ContextCache(ttl_seconds)
        self.versions = ContextVersions(redis, ttl_seconds)  # beside the sessions (same role)
        self.modes_epoch = ModesEpoch(partial(sql.modes_epoch, reads))

    async def changed(self, viewer_id: int) -> None:
        """The viewer followed, unfollowed, blocked, unblocked or posted (committed): their
        next first page reads its context afresh, in every process. Redis failing here
        leaves cached copies for at most FEED_CONTEXT_TTL_SECONDS (decision 0047)."""
        self.cache.forget(viewer_id)
        if self.cache.ttl > 0:
            with contextlib.suppress(RedisError, OSError):
                await self.versions.bump(viewer_id)

    async def read_context(
        self,
        viewer_id: int,
        affinity: bool,
        before: int,
        limit: int,
        version: object = NOT_READ,
    ) -> ViewerContext:
        """Graph, affinity, and the viewer's newest `limit` posts below `before`; a first
        page's from the context cache while its token holds.
        `version`: the token as read in advance (None: it could not be), or `NOT_READ`."""
        recent = datetime.now(UTC) - RECENT_WINDOW
        cache = self.cache
        if before != MAX_ID or cache.ttl <= 0:
            return await self._read(viewer_id, recent, limit, affinity, before)
        # The token is read before the context is: a change committed after the context was
        # read has replaced the token by then (see the module doc).
        if version is NOT_READ:
            try:
                version = await self.deadline.within(self.versions.current(viewer_id))
            except (RedisError, TimeoutError, OSError):
                version = None
        if not isinstance(version, bytes):
            return await self._read(viewer_id, recent, limit, affinity, before)
        token = (version, await self.modes_epoch.current(), affinity, limit)
        context = cache.get(viewer_id, token)
        if context is not None:
            _CONTEXT_HIT.inc()
            return context
        _CONTEXT_MISS.inc()
        fresh, on_replica = await self.filter.routed_where(
            CONTEXT_USE,
            viewer_id,
            partial(_context, viewer_id, recent, limit, affinity, before),
            _no_authors,
        )
        if not on_replica:
            # Kept only when read on the primary: the token's modes epoch is the primary's,
            # and a replica may not have replayed the mode switch it counts yet.
            cache.put(viewer_id, token, fresh)
        return fresh

    async def _read(
        self, viewer_id: int, recent: datetime, limit: int, affinity: bool, before: int
    ) -> ViewerContext:
        """The context on a replica that has the viewer's marks, else the primary."""
        run = partial(_context, viewer_id, recent, limit, affinity, before)
        return await self.filter.routed(CONTEXT_USE, viewer_id, run, _no_authors)


async def _context(
    viewer_id: int, recent: datetime, limit: int, affinity: bool, before: int, reads: Reads
) -> ViewerContext:
    return await sql.viewer_context(reads, viewer_id, recent, limit, affinity, before)


def _no_authors(_: ViewerContext) -> tuple[int, ...]:
    """A context concerns the viewer's own marks only (its rows are the viewer's)."""
    return ()
