"""A broadcast's per-subscriber path (issue 24, round 3): a frame the interval allows goes
out at once without passing through the pending slot, later ones within the interval are
still merged into one, and a pull-mode post's followers are checked in slices all in flight."""

from __future__ import annotations

import asyncio

from app.realtime import hub as hub_module
from app.realtime.counts import FeedCount
from app.realtime.hub import Subscriber, delivery_slices
from app.realtime.metrics import DELIVERED


class Sink:
    """Frames as the hub hands them to a socket (app.api.fast.live_frames's role)."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.written = asyncio.Event()

    def send(self, state: FeedCount) -> asyncio.Future[None] | None:
        self.sent.append(state.count)
        self.written.set()
        return None


async def never(code: int, reason: str) -> None:
    raise AssertionError("not dropped")


async def test_a_frame_the_interval_allows_goes_out_at_once_and_a_burst_after_it_merges() -> None:
    sink, waiting = Sink(), set[Subscriber]()
    sub = Subscriber(1, never, interval=0.2, sink=sink, waiting=waiting)
    delivered = DELIVERED._value.get()
    sub.offer(FeedCount(1, 1))
    assert sink.sent == [1]
    # Sent at once: nothing pending, so the stall sweep has nothing to look at.
    assert sub.pending is None and not waiting
    for i in range(2, 6):
        sub.offer(FeedCount(i, i))  # within the interval: merged into the pending slot
    assert sink.sent == [1] and sub.pending == FeedCount(5, 5) and waiting == {sub}
    started = asyncio.get_running_loop().time()
    sink.written.clear()
    await asyncio.wait_for(sink.written.wait(), 5)
    assert asyncio.get_running_loop().time() - started >= 0.15  # at the interval's end
    assert sink.sent == [1, 5] and sub.pending is None
    await asyncio.sleep(0)  # the per-turn metrics flush
    assert DELIVERED._value.get() - delivered == 2
    sub.mark_dropped()
    sub.offer(FeedCount(6, 6))
    assert sink.sent == [1, 5]  # dropped: nothing more, not even at once


def test_a_large_audience_is_cut_into_at_most_slices_in_flight_slices() -> None:
    size, in_flight = hub_module.DELIVER_SLICE, hub_module.SLICES_IN_FLIGHT
    for followers in (1, size, 3 * size + 1, in_flight * size, 5 * size, 20_000):
        users = list(range(followers))
        slices = delivery_slices(users)
        assert [u for s in slices for u in s] == users  # every follower once, in order
        assert len(slices) <= in_flight  # all of them checked at once
        assert all(len(s) >= min(size, followers) for s in slices[:-1])
    assert [len(s) for s in delivery_slices(list(range(5_000)))] == [1_250] * 4
    assert [len(s) for s in delivery_slices(list(range(2_500)))] == [1_000, 1_000, 500]
    assert delivery_slices([]) == []
