"""A broadcast's per-subscriber path (issue 24, round 3): a frame the interval allows goes
out at once without passing through the pending slot, later ones within the interval are
still merged into one, and a pull-mode post's followers are checked in growing slices all in
flight."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.config import Settings
from app.realtime import constants
from app.realtime import hub as hub_module
from app.realtime import leases as leases_module
from app.realtime.counts import FeedCount
from app.realtime.delivery import delivery_slices
from app.realtime.hub import Hub
from app.realtime.leases import RENEW_BATCH, SOCKETS, Cap, Leases, user_key
from app.realtime.metrics import DELIVERED
from app.realtime.subscriber import Subscriber
from app.state import AppState
from tests.conftest import TEST_DB


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
    before_first = time.monotonic()  # the subscriber's clock; the interval runs from the frame
    sub.offer(FeedCount(1, 1))
    assert sink.sent == [1]
    # Sent at once: nothing pending, so the stall sweep has nothing to look at.
    assert sub.pending is None and not waiting
    for i in range(2, 6):
        sub.offer(FeedCount(i, i))  # within the interval: merged into the pending slot
    assert sink.sent == [1] and sub.pending == FeedCount(5, 5) and waiting == {sub}
    sink.written.clear()
    await asyncio.wait_for(sink.written.wait(), 5)
    # At the interval's end, counted from the first frame (a bound a loaded machine can only
    # exceed: the timer fires no earlier than the first frame's time plus the interval).
    assert time.monotonic() - before_first >= 0.19
    assert sink.sent == [1, 5] and sub.pending is None
    await asyncio.sleep(0)  # the per-turn metrics flush
    assert DELIVERED._value.get() - delivered == 2
    sub.mark_dropped()
    sub.offer(FeedCount(6, 6))
    assert sink.sent == [1, 5]  # dropped: nothing more, not even at once


def test_a_large_audience_is_cut_into_growing_slices_all_in_flight() -> None:
    """The first slice is small (its frames are the round's first, after one short SQL
    query and script) and each later one at most ~2.5x the users before it (its script
    ends while those are written)."""
    size, in_flight = constants.DELIVER_SLICE, constants.SLICES_IN_FLIGHT
    for followers in (1, size, size + 1, 3 * size + 1, 5 * size, 20_000):
        users = list(range(followers))
        slices = delivery_slices(users)
        assert [u for s in slices for u in s] == users  # every follower once, in order
        assert len(slices) <= in_flight  # all of them checked at once
        if followers <= size:
            assert len(slices) == 1
            continue
        lengths = [len(s) for s in slices]
        assert lengths == sorted(lengths) and lengths[0] <= followers // 10
        assert all(lengths[k] <= 2.5 * sum(lengths[:k]) for k in range(1, len(lengths)))
    assert [len(s) for s in delivery_slices(list(range(5_000)))] == [416, 834, 1_666, 2_084]
    assert delivery_slices([]) == []


async def test_upkeep_waits_while_a_pull_mode_post_is_delivered(
    state: AppState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lease renewal batches (and the follow refresh, the resync, the heap freezer) hold
    back while a broadcast is in flight, and go on when it ends (decision 0062).

    No timed wait: the pass's budget is made longer than any test run, so only the
    broadcast's end can let the renewal on, and "still waiting" is checked once the renewal
    is inside its pause (a signal), after the loop has had turns to run it on."""
    monkeypatch.setattr(hub_module, "UPKEEP_MAX_WAIT", 3600.0)
    settings = Settings(realtime_namespace=TEST_DB, realtime_author_concurrency=1)
    hub = Hub(state.redis, state.sessions, settings, state.timelines)
    hub._followers[99] = {1}  # a local follower of pull-mode author 99
    await hub.leases.acquire([Cap(user_key(1, SOCKETS), 5, "account")])
    paused: list[bool] = []
    entered = asyncio.Event()
    waits = hub._upkeep_pause()

    async def pause() -> None:
        entered.set()
        await waits()
        paused.append(True)

    async with hub._author_sem:  # the post's delivery is under way (held here)
        hub._handle(
            {"type": "message", "channel": hub._author_prefix + b"99", "data": b"1:2:public:3"}
        )
        renewal = asyncio.create_task(hub.leases.renew(pause))
        await asyncio.wait_for(entered.wait(), 5)
        for _ in range(10):  # loop turns, not a time: a pause that did not wait ends in one
            await asyncio.sleep(0)
        assert not renewal.done() and not paused  # waiting for the broadcast to end
    await asyncio.wait_for(renewal, 5)
    assert paused == [True]
    if hub._tasks:
        await asyncio.wait(hub._tasks, timeout=5)
    assert hub._no_broadcast.is_set()
    await hub.leases.release_all()


async def test_an_upkeep_pass_waits_for_broadcasts_two_seconds_in_all(
    state: AppState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A steady stream of posts delays a pass by UPKEEP_MAX_WAIT in all, not per batch:
    20,000 sockets' renewal (40 batches) must not wait past its 60 s lease."""
    monkeypatch.setattr(hub_module, "UPKEEP_MAX_WAIT", 0.05)
    hub = Hub(state.redis, state.sessions, Settings(realtime_namespace=TEST_DB), state.timelines)
    hub._no_broadcast.clear()  # a broadcast that never ends
    pause = hub._upkeep_pause()
    await pause()  # the pass's whole budget, spent waiting
    for _ in range(10):  # every later batch of the pass goes on without suspending
        step = pause()
        with pytest.raises(StopIteration):
            step.send(None)


async def test_a_renewal_pauses_before_each_batch(
    state: AppState, monkeypatch: pytest.MonkeyPatch
) -> None:
    leases = Leases(state.redis, 60)
    holds = await asyncio.gather(
        *(leases.acquire([Cap(user_key(u, SOCKETS), 5, "account")]) for u in range(1, 12))
    )
    calls: list[int] = []

    async def pause() -> None:
        calls.append(1)

    for batch in (4, 10, 11, RENEW_BATCH):
        calls.clear()
        monkeypatch.setattr(leases_module, "RENEW_BATCH", batch)
        await leases.renew(pause)
        assert len(calls) == -(-11 // batch)  # 11 keys held: one pause per batch
    await asyncio.gather(*(hold.release() for hold in holds))
