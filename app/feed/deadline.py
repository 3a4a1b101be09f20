"""Redis source reads within FEED_SOURCE_TIMEOUT_MS, with patience for a busy process.

Every stage that reads a Redis source (the timeline, the pulled authors, the context token,
impressions, a first page's pipeline) reads it through one `SourceDeadline` per process: past
the timeout the page is answered without that source, degraded, unless the process itself
is the likelier reason the read is late (see `SourceDeadline.within`)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import TypeVar

from prometheus_client import Counter

from app.feed.constants import (
    BUSY_SHARE,
    LOOP_LAG_PERIOD_SECONDS,
    LOOP_LAG_WINDOW_SECONDS,
    MAX_FALLBACKS,
    PATIENCE,
)

T = TypeVar("T")

FEED_PATIENT = Counter(
    "feed_source_patient_total",
    "Extra source timeouts given to late Redis reads (busy loop or MAX_FALLBACKS), not degraded",
)


class LoadTimeout(TimeoutError):
    """A source read still late after PATIENCE more timeouts, all with a busy event loop:
    degraded because of this process's load (metric reason "load_timeout")."""


class LoopLag:
    """How late this process's event loop lately ran its timers (s): the backlog of work
    every await waits behind. A timer is armed every PERIOD while reads ask (`recent`), and
    for two WINDOWs after the last one; nothing runs in an idle process."""

    PERIOD = LOOP_LAG_PERIOD_SECONDS
    WINDOW = LOOP_LAG_WINDOW_SECONDS

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


class SourceDeadline:
    """The process's source timeout, its event-loop watch and its running PostgreSQL
    fallbacks: what decides whether a late read degrades now or waits on."""

    def __init__(self, timeout_seconds: float) -> None:
        # Per Redis source: past it the page is answered without that source.
        self.timeout = timeout_seconds
        self.loop_lag = LoopLag()
        self.fallbacks = 0  # Postgres fallbacks for the timeline running now

    @contextmanager
    def falling_back(self) -> Iterator[None]:
        """Counts a PostgreSQL fallback read while it runs (MAX_FALLBACKS)."""
        self.fallbacks += 1
        try:
            yield
        finally:
            self.fallbacks -= 1

    async def within(self, read: Coroutine[object, object, T]) -> T:
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
                    async with asyncio.timeout(self.timeout):
                        return await asyncio.shield(task)
                except TimeoutError:
                    busy = lag.recent() >= self.timeout * BUSY_SHARE
                    if late == PATIENCE:
                        raise (LoadTimeout() if busy else TimeoutError()) from None
                    if not busy and self.fallbacks < MAX_FALLBACKS:
                        raise
                    late += 1
                    FEED_PATIENT.inc()
        finally:
            task.cancel()  # a no-op once done
