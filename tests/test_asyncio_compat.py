"""`asyncio.wait_for` in every process that imports `app` (decision 0093): a cancellation that
arrives as the awaited work finishes is raised, not dropped (Python 3.11's wait_for returned the
result instead, and a worker sent SIGTERM polled on for ever)."""

from __future__ import annotations

import asyncio

import pytest


async def _done_at_once() -> str:
    return "done"


async def _loop_on_wait_for(stop: asyncio.Event) -> None:
    """A poll loop like ARQ's over redis-py 8, whose every send runs inside wait_for."""
    while not stop.is_set():
        await asyncio.wait_for(_done_at_once(), 5)
        await asyncio.sleep(0)


@pytest.mark.parametrize("turns", range(12))
async def test_a_cancel_is_never_lost(turns: int) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(_loop_on_wait_for(stop))
    for _ in range(turns):  # lands the cancel at each point of the loop's cycle
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2)
    try:
        assert task in done, "the cancel was swallowed: the loop runs on"
        assert task.cancelled()
    finally:
        stop.set()  # with the bug a cancel is no way to end it
        await asyncio.wait({task}, timeout=2)


async def test_wait_for_keeps_its_contract() -> None:
    assert await asyncio.wait_for(_done_at_once(), 1) == "done"
    assert await asyncio.wait_for(_done_at_once(), None) == "done"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.sleep(5), 0.01)
    finished: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    finished.set_result(7)
    assert await asyncio.wait_for(finished, 0) == 7  # a done future is returned at once
    pending = asyncio.ensure_future(asyncio.sleep(5))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(pending, 0)
    assert pending.cancelled()  # and what timed out is cancelled, as before

    async def fails() -> None:
        raise ValueError("inner")

    with pytest.raises(ValueError, match="inner"):
        await asyncio.wait_for(fails(), 1)
