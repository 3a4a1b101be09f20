"""A buffer written in the background: the scheduling that the impressions' Redis buffer
(app.feed.impressions) and the engagement log's COPY buffer (app.engagement.writer) share.

A subclass buffers without I/O and calls `_schedule(delay)` when a write is due: one timer
per event loop, a flush task kept referenced until done, its failure logged (never raised
into the loop). `close` waits for running flushes and writes what is left."""

from __future__ import annotations

import asyncio
import contextlib
import logging

log = logging.getLogger("app.background_flush")


class BackgroundFlush:
    """Subclasses define `flush` (write what is buffered) and name what they write."""

    def __init__(self, what: str) -> None:
        self._what = what  # in the log line of a failed flush
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def flush(self) -> int:
        raise NotImplementedError

    async def close(self) -> None:
        """Write what is buffered (a process shutting down)."""
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task
        with contextlib.suppress(Exception):
            await self.flush()

    def _schedule(self, delay: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a script): the caller flushes
        if self._timer is not None and self._timer_loop is loop and delay > 0:
            return  # a flush is already due
        self._cancel_timer()
        self._timer_loop = loop
        self._timer = loop.call_later(delay, self._start_flush, loop)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_loop = None

    def _start_flush(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = self._timer_loop = None
        task = loop.create_task(self._flush_logged())
        self._tasks.add(task)  # keep a reference until done, or it may be collected
        task.add_done_callback(self._tasks.discard)

    async def _flush_logged(self) -> None:
        try:
            await self.flush()
        except Exception:  # a background flush must never go unnoticed nor kill the loop
            log.exception("%s flush failed", self._what)
