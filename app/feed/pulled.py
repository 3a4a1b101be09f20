"""The pulled authors as a candidate source: the newest posts of the followees the viewer
reads by pull (PULL-mode authors, just-followed or just-switched ones), from each author's
Redis index behind a short in-process cache (a celebrity is read by every follower's feed:
one Redis read per process per AUTHOR_CACHE_SECONDS, loads of one author coalesced)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.feed.constants import AUTHOR_CACHE_SECONDS, PULL_PER_AUTHOR
from app.feed.deadline import LoadTimeout, SourceDeadline
from app.feed.hot_cache import CoalescingCache
from app.observability.metrics import FEED_CACHE, FEED_DEGRADED, FEED_PULL_SOURCE
from app.posts.queries import author_posts
from app.timelines.store import TimelineStore


class PulledAuthors:
    """Each pulled author's newest post ids (newest first), cached for a moment."""

    def __init__(
        self,
        store: TimelineStore,
        read_sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        deadline: SourceDeadline,
    ) -> None:
        self.store = store
        self.read_sessions = read_sessions
        self.settings = settings
        self.deadline = deadline
        # Each pulled author's newest post ids, newest first.
        self.cache: CoalescingCache[int, list[int]] = CoalescingCache(AUTHOR_CACHE_SECONDS)

    async def read_pulled(self, authors: Sequence[int]) -> tuple[dict[int, list[int]], bool]:
        """The pulled authors' newest posts, and False when they could not be read in time
        (the page then goes without them, degraded)."""
        if not authors:
            return {}, True
        started = time.perf_counter()
        try:
            found, misses = await self.deadline.within(
                self.cache.get_many_counted(list(authors), self._load)
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

    async def _load(self, authors: list[int]) -> dict[int, list[int]]:
        found = await self.store.author_latest_ids_many_or_none(authors, PULL_PER_AUTHOR)
        missing = [a for a, ids in found.items() if ids is None]
        result: dict[int, list[int]] = {}
        last = self.cache.last
        for author, ids in found.items():
            if ids is not None:
                # Unchanged since the last load: the same list object, so a viewer's merge
                # of them is found again (`candidates.Merges` compares the lists by identity).
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
