"""A `feedUpdates` subscription's one-slot queue, and where its frames go.

Why a one-slot queue per subscriber: updates carry the running count, so a newer one makes
an older one worthless. The slot is overwritten (coalesced), never grows, and the hub never
awaits a socket: a client whose socket stops draining keeps one pending update and is dropped
after `stall_seconds` (the hub's stall sweep), while everyone else is served as before.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from app.realtime.counts import FeedCount
from app.realtime.metrics import COALESCED, frame_delivered

OnDrop = Callable[[int, str], Awaitable[None]]


class FrameSink(Protocol):
    """Where a subscriber's frames go when the hub writes them itself (app.api.fast.live_frames)."""

    def send(self, state: FeedCount) -> asyncio.Future[None] | None:
        """Write one frame: None when it went out at once, else the pending write."""
        ...


class Subscriber:
    """One `feedUpdates` subscription: a one-slot queue that merges updates.

    With a sink, the hub writes frames itself: an update goes out inline when the interval
    allows, else a timer sends the newest pending one at the interval's end. Without one,
    the subscription's own task takes updates with `next()`.
    """

    __slots__ = (
        "_inflight",
        "_interval",
        "_last_frame",
        "_pending",
        "_timer",
        "_wake",
        "dropped",
        "on_drop",
        "pending_since",
        "sink",
        "user_id",
        "waiting",
    )

    def __init__(
        self,
        user_id: int,
        on_drop: OnDrop,
        interval: float,
        sink: FrameSink | None = None,
        waiting: set[Subscriber] | None = None,
    ) -> None:
        self.user_id = user_id
        # The hub's set of subscribers holding an update (its stall sweep reads only these).
        self.waiting = waiting
        self.on_drop = on_drop
        self.sink = sink
        self.dropped = False
        self.pending_since = 0.0
        self._interval = interval
        self._pending: FeedCount | None = None
        self._last_frame = 0.0
        # Only a subscriber without a sink is woken (its task calls `next`): an Event (with
        # its waiter deque) per socket was ~0.6 KB of every prepared-frame socket.
        self._wake: asyncio.Event | None = asyncio.Event() if sink is None else None
        self._timer: asyncio.TimerHandle | None = None
        self._inflight: asyncio.Future[None] | None = None

    @property
    def pending(self) -> FeedCount | None:
        return self._pending

    def offer(self, state: FeedCount, now: float | None = None) -> None:
        """Never blocks: replaces an update the socket has not taken yet. `now` (monotonic)
        lets a broadcast read the clock once for all its subscribers."""
        if self.dropped:
            return
        if now is None:
            now = time.monotonic()
        sink = self.sink
        if (
            sink is not None
            and self._pending is None
            and self._timer is None
            and self._inflight is None
            and self._last_frame + self._interval - now <= 0
        ):
            # A broadcast's common case, `_pump`'s without the pending slot: the frame goes
            # out now, so the subscriber never joins `waiting` (nor the stall sweep's walk).
            self._last_frame = now
            frame_delivered(state.published_ms)
            waiting = sink.send(state)
            if waiting is not None:
                self._inflight = waiting
                waiting.add_done_callback(self._sent)
            return
        if self._pending is None:
            self.pending_since = now
            if self.waiting is not None:
                self.waiting.add(self)
        else:
            COALESCED.inc()
        self._pending = state
        if self._wake is not None:
            self._wake.set()
        else:
            self._pump(now)

    def offer_initial(self, state: FeedCount, read_at_ms: float) -> None:
        """The count read at subscribe time, unless a notification published after the read
        already arrived (it is newer)."""
        if self._pending is None or self._pending.published_ms < read_at_ms:
            self._pending = None
            self.offer(state)

    def mark_dropped(self) -> None:
        self.dropped = True
        self._pending = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._wake is not None:
            self._wake.set()

    def _pump(self, now: float | None = None) -> None:
        """Send the pending update now if the interval and the socket allow it."""
        if self._pending is None or self._timer is not None or self._inflight is not None:
            return
        if now is None:
            now = time.monotonic()
        delay = self._last_frame + self._interval - now
        if delay > 0:
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)
            return
        state, self._pending = self._pending, None
        self._last_frame = now
        _observe(state)
        assert self.sink is not None
        waiting = self.sink.send(state)
        if waiting is not None:
            self._inflight = waiting
            waiting.add_done_callback(self._sent)

    def _on_timer(self) -> None:
        self._timer = None
        if not self.dropped:
            self._pump()

    def _sent(self, done: asyncio.Future[None]) -> None:
        self._inflight = None
        if not done.cancelled():
            done.exception()  # retrieved: a failed write ends with the socket's close
        if not self.dropped:
            self._pump()

    async def next(self) -> FeedCount:
        """The next update to send; at most one per interval (a burst becomes one frame).

        Once dropped it waits until cancelled: the hub is closing the socket, and ending the
        stream here would race a 'complete' message against that close.
        """
        wake = self._wake
        assert wake is not None, "a subscriber with a sink is not read with next()"
        while True:
            await wake.wait()
            delay = self._last_frame + self._interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.dropped:
                await asyncio.get_running_loop().create_future()
            state, self._pending = self._pending, None
            wake.clear()
            if state is None:
                continue
            self._last_frame = time.monotonic()
            _observe(state)
            return state


def _observe(state: FeedCount) -> None:
    frame_delivered(state.published_ms)  # counted at the end of the loop turn
