"""app.coalesce: calls that arrive together run as one batch, each caller gets its own answer."""

from __future__ import annotations

import asyncio

import pytest

from app.coalesce import Coalesced


async def test_calls_made_together_run_as_one_batch_with_their_own_answers() -> None:
    batches: list[list[int]] = []

    async def run(items: list[int]) -> list[int | BaseException]:
        batches.append(items)
        await asyncio.sleep(0.01)
        return [ValueError(f"odd {i}") if i % 2 else i * 10 for i in items]

    doubled = Coalesced(run)
    first = await asyncio.gather(*(doubled(i) for i in range(4)), return_exceptions=True)
    assert batches == [[0, 1, 2, 3]]
    assert first[0] == 0 and first[2] == 20
    assert isinstance(first[1], ValueError) and str(first[1]) == "odd 1"

    # Arrivals while a batch runs wait for the next one.
    early = asyncio.ensure_future(doubled(4))
    await asyncio.sleep(0)
    late = [asyncio.ensure_future(doubled(i)) for i in (6, 8)]
    assert await asyncio.gather(early, *late) == [40, 60, 80]
    assert batches[1:] == [[4], [6, 8]]


async def test_a_failed_batch_fails_each_caller_and_a_cancelled_caller_is_given_back() -> None:
    orphans: list[str] = []

    async def run(items: list[str]) -> list[str | BaseException]:
        await asyncio.sleep(0.05)
        if "boom" in items:
            raise ConnectionError("the store is away")
        return [f"hold {i}" for i in items]

    acquire = Coalesced(run, orphaned=orphans.append)
    with pytest.raises(ConnectionError):
        await asyncio.gather(acquire("a"), acquire("boom"))

    gone = asyncio.ensure_future(acquire("x"))
    kept = asyncio.ensure_future(acquire("y"))
    await asyncio.sleep(0.01)
    gone.cancel()
    assert await kept == "hold y"
    assert orphans == ["hold x"]  # what the batch took for the cancelled caller
