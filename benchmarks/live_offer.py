"""The hub's per-frame Python of a broadcast, without sockets (issue 24, round 3).

    python -m benchmarks.live_offer --subscribers 5000 --rounds 40

N `Subscriber`s with a sink that does what app.api.fast.live_frames' `SocketFrames.send`
does besides building and writing the frame (its prepared-frame counting, whichever way
this tree does it); each round offers every subscriber a new count at once, as
`Hub._deliver_author` does, then runs the loop turn that flushes the metrics and the stall
sweep's walk over the hub's `waiting` set. Prints the process CPU per frame (median and
best round). Run from a tree's root to measure that tree (a before/after pair: the same
file copied into both). The kernel's write (~10-15 us a frame) is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from app.api.fast import live_frames
from app.realtime.counts import FeedCount
from app.realtime.subscriber import Subscriber


def _count_write() -> Any:
    """This tree's per-frame prepared-write counting (a per-turn tally, or a Counter.inc)."""
    tally = getattr(live_frames, "prepared_written", None)
    if tally is not None:
        return lambda: tally("raw")
    return live_frames._RAW_WRITES.inc  # type: ignore[attr-defined]


class Sink:
    __slots__ = ("count",)

    def __init__(self, count: Any) -> None:
        self.count = count

    def send(self, state: FeedCount) -> None:
        self.count()


async def never(code: int, reason: str) -> None:
    raise AssertionError("not dropped")


async def main(args: argparse.Namespace) -> None:
    count = _count_write()
    waiting: set[Subscriber] = set()
    subs = [
        Subscriber(u, never, interval=0.25, sink=Sink(count), waiting=waiting)
        for u in range(args.subscribers)
    ]
    per_frame: list[float] = []
    now = time.monotonic()
    for r in range(args.rounds):
        now += 1.0  # a round a second: the interval has always passed
        state = FeedCount(r + 1, 1_700_000_000_000 + r, time.time() * 1000)
        cpu = time.process_time()
        for sub in subs:
            sub.offer(state, now)
        await asyncio.sleep(0)  # the turn's end: metrics flushed
        for sub in list(waiting):  # Hub._sweep_loop's walk, a second later
            if sub.pending is None or sub.dropped:
                waiting.discard(sub)
        per_frame.append((time.process_time() - cpu) / len(subs))
    print(
        f"subscribers {args.subscribers} rounds {args.rounds}: CPU per frame "
        f"{1e6 * statistics.median(per_frame):.2f} us median, {1e6 * min(per_frame):.2f} best"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=40)
    asyncio.run(main(parser.parse_args()))
