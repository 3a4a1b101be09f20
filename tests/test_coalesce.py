"""app.coalesce: calls that arrive together run as one batch, each caller gets its own answer.

The batch function waits on events the test sets (`running`, `release`), not on sleeps: which
call lands in which batch depends only on what the test let happen, never on how fast a
loaded machine runs the loop.
"""

from __future__ import annotations

import asyncio

import pytest

from app.coalesce import Coalesced


class Gate:
    """A batch function's hold: `running` is set when a batch has started, and the batch waits
    for `release` before it answers."""

    def __init__(self) -> None:
        self.running = asyncio.Event()
        self.release = asyncio.Event()

    async def hold(self) -> None:
        self.running.set()
        await self.release.wait()

    def open(self) -> None:
        self.release.set()


async def test_calls_made_together_run_as_one_batch_with_their_own_answers() -> None:
    batches: list[list[int]] = []
    gate = Gate()

    async def run(items: list[int]) -> list[int | BaseException]:
        batches.append(items)
        await gate.hold()
        return [ValueError(f"odd {i}") if i % 2 else i * 10 for i in items]

    doubled = Coalesced(run)
    gate.open()  # the first batch answers at once
    first = await asyncio.gather(*(doubled(i) for i in range(4)), return_exceptions=True)
    assert batches == [[0, 1, 2, 3]]
    assert first[0] == 0 and first[2] == 20
    assert isinstance(first[1], ValueError) and str(first[1]) == "odd 1"

    # Arrivals while a batch runs wait for the next one.
    gate = Gate()
    early = asyncio.ensure_future(doubled(4))
    await gate.running.wait()  # the batch of 4 has started and is held
    late = [asyncio.ensure_future(doubled(i)) for i in (6, 8)]
    await asyncio.sleep(0)  # both have joined the queue
    gate.open()
    assert await asyncio.gather(early, *late) == [40, 60, 80]
    assert batches[1:] == [[4], [6, 8]]


async def test_a_failed_batch_fails_each_caller_and_a_cancelled_caller_is_given_back() -> None:
    orphans: list[str] = []
    gate = Gate()

    async def run(items: list[str]) -> list[str | BaseException]:
        await gate.hold()
        if "boom" in items:
            raise ConnectionError("the store is away")
        return [f"hold {i}" for i in items]

    acquire = Coalesced(run, orphaned=orphans.append)
    gate.open()
    with pytest.raises(ConnectionError):
        await asyncio.gather(acquire("a"), acquire("boom"))

    gate = Gate()
    gone = asyncio.ensure_future(acquire("x"))
    kept = asyncio.ensure_future(acquire("y"))
    await gate.running.wait()  # one batch holds both
    gone.cancel()
    gate.open()
    assert await kept == "hold y"
    assert orphans == ["hold x"]  # what the batch took for the cancelled caller
