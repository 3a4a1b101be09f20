"""Candidate sources as one small interface (decision 0079): each source has a name, a cap on
the ids it adds to one candidate round, a timeout and a concurrency (a semaphore per source,
per process). A source that times out or fails is dropped for that page
(feed_source_dropped_total{source,reason}); the page answers with the other sources'
candidates, degraded. Sources only propose ids: the filter decides (app.feed.filter).

The sources: "timeline" (app.feed.home_timeline), "pull" (app.feed.pulled), "own" (the
viewer's own posts, from the context or PostgreSQL), "lag" (followees' recent posts under
fan-out queue lag) and "recommended" (app.feed.recommended; RANKED first pages only).

What a budget costs a page: no task. `SourceBudget.run` awaits the read in the caller's task
under `asyncio.timeout` and the semaphore (no wait while free): ~19 us a read, measured on
asyncio's default loop on the loaded 2-core machine (the timeout's timer is most of it). So
a source whose in-process cache answers (the pulled authors' `all_fresh`, the
recommendations' `cached`) skips the budget altogether, and the timeline read with a first
page's pipeline comes already read (`CandidateSources.gather` says how each is awaited)."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client import Counter
from redis.exceptions import RedisError
from sqlalchemy.exc import DBAPIError

from app.config import Settings
from app.errors import Unavailable
from app.feed.constants import SHARE_WINDOW
from app.observability.metrics import FEED_DEGRADED

T = TypeVar("T")
log = logging.getLogger("app.feed")

FEED_SOURCE_DROPPED = Counter(
    "feed_source_dropped_total",
    "Candidate sources dropped from a page (timeout: past the source's budget; error: it failed)",
    ["source", "reason"],
)

SOURCE_NAMES = ("timeline", "pull", "own", "lag", "recommended")
for _name in SOURCE_NAMES:  # exported at 0 from the start
    for _reason in ("timeout", "error"):
        FEED_SOURCE_DROPPED.labels(_name, _reason)


class SourceDropped(Exception):
    """A source gave up within its budget: the page goes on without it."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"candidate source {source} dropped: {reason}")
        self.source = source
        self.reason = reason


@dataclass(frozen=True, slots=True)
class SourceLimits:
    name: str
    max_candidates: int
    timeout_seconds: float
    concurrency: int


def source_limits(settings: Settings) -> dict[str, SourceLimits]:
    """Each source's limits from its FEED_SOURCE_<NAME>_* settings."""
    found = {}
    for name in SOURCE_NAMES:
        found[name] = SourceLimits(
            name,
            getattr(settings, f"feed_source_{name}_max"),
            getattr(settings, f"feed_source_{name}_timeout_ms") / 1000,
            getattr(settings, f"feed_source_{name}_concurrency"),
        )
    return found


class SourceBudget:
    """One source's limits and its semaphore in this process."""

    def __init__(self, limits: SourceLimits) -> None:
        self.limits = limits
        self.name = limits.name
        self.max_candidates = limits.max_candidates
        self._slots = asyncio.Semaphore(limits.concurrency)
        self._dropped = {
            reason: FEED_SOURCE_DROPPED.labels(limits.name, reason)
            for reason in ("timeout", "error")
        }
        self._degraded = FEED_DEGRADED.labels(f"source_{limits.name}")

    async def run(self, read: Awaitable[T]) -> T:
        """The source's read within its timeout and concurrency, in the caller's task;
        SourceDropped (counted) when it is late or fails. PostgreSQL out of reach is not a
        source's failure: `Unavailable` goes up as it would without sources."""
        try:
            async with asyncio.timeout(self.limits.timeout_seconds):
                async with self._slots:
                    return await read
        except TimeoutError:
            raise self.dropped("timeout") from None
        except Unavailable:
            raise
        except (RedisError, OSError, DBAPIError) as exc:
            log.warning("candidate source %s failed: %r", self.name, exc)
            raise self.dropped("error") from exc

    def dropped(self, reason: str) -> SourceDropped:
        self._dropped[reason].inc()
        self._degraded.inc()
        return SourceDropped(self.name, reason)


class SourceBudgets:
    """Every source's budget, by name (one per process: the semaphores are shared)."""

    def __init__(self, settings: Settings) -> None:
        self.by_name = {name: SourceBudget(lim) for name, lim in source_limits(settings).items()}

    def __getitem__(self, name: str) -> SourceBudget:
        return self.by_name[name]


def cap_share(ids: list[int], recommended: frozenset[int], share: float) -> list[int]:
    """The session's order with at most `share` of it recommended: no more than
    ceil(share x SHARE_WINDOW) recommended ids in any SHARE_WINDOW consecutive positions (the
    one place the share is enforced). Each id keeps its rank among its kind; a recommendation
    that does not fit where it ranked waits for the first position where it does, ahead of
    lower-ranked ones; the ones that never fit (too few followed posts to space them) are
    left out of the session."""
    if not recommended:
        return ids
    allowed = math.ceil(share * SHARE_WINDOW)
    if allowed >= SHARE_WINDOW:
        return ids
    if allowed == 0:
        return [i for i in ids if i not in recommended]
    out: list[int] = []
    placed: list[int] = []  # positions of recommendations in `out`
    waiting: list[int] = []  # recommendations that did not fit yet, in rank order
    w = 0  # next waiting one
    for post_id in ids:
        if post_id in recommended:
            waiting.append(post_id)
        else:
            # A waiting recommendation ranked above this post goes first when it fits.
            while w < len(waiting) and _fits(placed, len(out), allowed):
                placed.append(len(out))
                out.append(waiting[w])
                w += 1
            out.append(post_id)
    while w < len(waiting) and _fits(placed, len(out), allowed):
        placed.append(len(out))
        out.append(waiting[w])
        w += 1
    return out


def _fits(placed: list[int], position: int, allowed: int) -> bool:
    """A recommendation at `position` keeps every window of SHARE_WINDOW within `allowed`:
    the windows ending at or after it hold the recommendations placed in the last
    SHARE_WINDOW - 1 positions."""
    if len(placed) < allowed:
        return True
    return placed[-allowed] <= position - SHARE_WINDOW
