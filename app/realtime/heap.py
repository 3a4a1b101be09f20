"""The garbage collector's policy while a process holds thousands of long-lived sockets.

Two parts, both measured (decisions 0039, 0062): the sockets' objects frozen out of the
collector's full walks (`HeapFreezer`), and the collector held off while a broadcast is
written (`CollectorPause`). Both are on only with REALTIME_GC_FREEZE_SUBSCRIBERS > 0.
"""

from __future__ import annotations

import gc

from app.realtime.constants import HEAP_THAW_FRACTION


class HeapFreezer:
    """Keeps the sockets' objects out of the garbage collector's full walks (decision 0039).

    Why: every socket holds a few hundred GC-tracked objects for hours; a full collection
    walks all of them (1.5 M objects at 5,000 sockets: 0.5-1.8 s on this machine's cores),
    and it lands inside whatever runs, a broadcast included: the worst round's last frame
    was 3-8x the median's. `gc.freeze()` moves every object alive now into a generation
    the collector never walks; objects still die by reference counting as before.

    The price: a reference cycle among frozen objects (a closed socket's handler, tasks
    and frames) is not collected while frozen. So the heap is thawed and collected once
    (one pause, after churn, not in every broadcast) when the subscribers dropped since the
    last thaw reach a quarter of those frozen.
    """

    THAW_FRACTION = HEAP_THAW_FRACTION

    def __init__(self, min_subscribers: int) -> None:
        self.min_subscribers = min_subscribers
        self.frozen_for = 0  # subscribers at the last freeze (0: nothing frozen by us)
        self.admitted = 0  # subscribers admitted since the last freeze
        self.dropped = 0  # subscribers gone since the last thaw

    def tick(self, subscribers: int) -> None:
        """Called about once a second by the hub."""
        if self.min_subscribers <= 0:
            return
        if self.frozen_for and self.dropped >= max(1, self.THAW_FRACTION * self.frozen_for):
            self.thaw()
            gc.collect()
        if subscribers >= self.min_subscribers and (self.admitted or not self.frozen_for):
            gc.collect(1)  # the young generations' garbage is not frozen (cheap)
            gc.freeze()
            self.frozen_for = max(self.frozen_for, subscribers)
            self.admitted = 0

    def thaw(self) -> None:
        if self.frozen_for:
            gc.unfreeze()
            self.frozen_for = 0
            self.dropped = 0


class CollectorPause:
    """The garbage collector held off while broadcasts are being written (nested: the
    last one to end turns it back on), when HeapFreezer is on.

    Why: a broadcast to 5,000 sockets allocates ~10,000 tracked objects (states, replies,
    coroutines), which set off 6-20 young collections inside the round; timed in the
    server they added 2-18 ms to a round (one 17.7 ms, descheduled mid-walk on a loaded
    machine). Held off, the same garbage is collected by the first allocation after the
    round, once, after the last frame (decision 0062). Only reference cycles wait: the
    rest is freed by reference counting as always."""

    def __init__(self) -> None:
        self.depth = 0
        self._disabled = False

    def __enter__(self) -> None:
        if self.depth == 0 and gc.isenabled():
            gc.disable()
            self._disabled = True
        self.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth == 0 and self._disabled:
            self._disabled = False
            gc.enable()
