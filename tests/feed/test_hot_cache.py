"""The feed's in-process cache of hot keys (app.feed.hot_cache.CoalescingCache: pull-mode
authors' indexes): values live `ttl` seconds on the cache's clock (a test clock here), a key
being loaded is joined rather than loaded again, and a failed or abandoned load harms nobody.

The loaders are plain coroutines: the cache itself touches no Redis (the feed's loader does).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from app.feed import hot_cache
from app.feed.hot_cache import CoalescingCache
from tests.helpers import MonotonicClock, eventually


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> MonotonicClock:
    """The cache's clock, for every test here: time moves only when a test moves it."""
    fake = MonotonicClock()
    monkeypatch.setattr(hot_cache, "time", fake)
    return fake


class Loader:
    """Records every call; with `hold`, each call waits for `release()` (a load in flight)."""

    def __init__(self, hold: bool = False, fail: Exception | None = None) -> None:
        self.calls: list[list[int]] = []
        self.gate = asyncio.Event()
        if not hold:
            self.gate.set()
        self.fail = fail

    async def __call__(self, keys: list[int]) -> dict[int, str]:
        self.calls.append(list(keys))
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return {k: f"v{k}" for k in keys if k != 404}  # 404: a key the source does not have

    def release(self) -> None:
        self.gate.set()


def _get(cache: CoalescingCache[int, str], keys: Sequence[int], load: Loader):
    return asyncio.ensure_future(cache.get_many(keys, load))


async def test_values_are_served_until_their_ttl_runs_out(clock: MonotonicClock) -> None:
    cache: CoalescingCache[int, str] = CoalescingCache(ttl_seconds=2.0)
    load = Loader()
    assert await cache.get_many([1, 2], load) == {1: "v1", 2: "v2"}
    clock.now += 1.999
    assert await cache.get_many([2, 1], load) == {1: "v1", 2: "v2"}
    assert load.calls == [[1, 2]]
    assert (cache.hits, cache.misses) == (2, 2)
    clock.now += 0.001  # two seconds after the load: expired
    assert await cache.get_many([1], load) == {1: "v1"}
    assert load.calls == [[1, 2], [1]]


async def test_concurrent_misses_call_the_loader_once() -> None:
    cache: CoalescingCache[int, str] = CoalescingCache(ttl_seconds=2.0)
    load = Loader(hold=True)
    readers = [asyncio.ensure_future(cache.get_many_counted([7], load)) for _ in range(20)]
    await eventually(lambda: cache.hits + cache.misses == 20, what="all 20 readers asked")
    assert load.calls == [[7]]  # one load in flight, 19 readers waiting on it
    load.release()
    results = await asyncio.gather(*readers)
    assert [found for found, _ in results] == [{7: "v7"}] * 20
    assert sorted(misses for _, misses in results) == [0] * 19 + [1]  # who loaded, per call
    assert await cache.get_many([7], load) == {7: "v7"}  # and it was stored for the others
    assert load.calls == [[7]]


async def test_overlapping_requests_load_only_the_keys_not_yet_in_flight() -> None:
    cache: CoalescingCache[int, str] = CoalescingCache(ttl_seconds=2.0)
    first_load, second_load = Loader(hold=True), Loader()
    first = _get(cache, [1, 2], first_load)
    await eventually(lambda: first_load.calls)
    second = _get(cache, [2, 3], second_load)
    await eventually(lambda: second_load.calls)
    assert second_load.calls == [[3]]  # 2 is joined, not loaded twice
    assert not second.done()  # ...so it waits for the first load
    first_load.release()
    assert await first == {1: "v1", 2: "v2"}
    assert await second == {2: "v2", 3: "v3"}  # only the keys asked for


async def test_invalidate_and_clear_drop_values() -> None:
    cache: CoalescingCache[int, str] = CoalescingCache(ttl_seconds=60.0)
    load = Loader()
    await cache.get_many([1, 2, 3], load)
    cache.invalidate(2)
    cache.invalidate(99)  # unknown keys are fine
    await cache.get_many([1, 2, 3], load)
    assert load.calls == [[1, 2, 3], [2]]
    cache.clear()
    await cache.get_many([1, 3], load)
    assert load.calls == [[1, 2, 3], [2], [1, 3]]


async def test_a_key_the_loader_does_not_return_is_absent_and_asked_again() -> None:
    cache: CoalescingCache[int, str] = CoalescingCache(ttl_seconds=60.0)
    load = Loader()
    assert await cache.get_many([1, 404], load) == {1: "v1"}
    assert await cache.get_many([1, 404], load) == {1: "v1"}
    assert load.calls == [[1, 404], [404]]


async def test_a_failed_load_reaches_every_waiter_and_is_not_kept() -> None:
    cache: CoalescingCache[int, str] = CoalescingCache(ttl_seconds=60.0)
    broken = Loader(hold=True, fail=ConnectionError("redis went away"))
    readers = [_get(cache, [5], broken) for _ in range(3)]
    await eventually(lambda: cache.hits + cache.misses == 3)
    broken.release()
    for reader in readers:
        with pytest.raises(ConnectionError, match="went away"):
            await reader
    healthy = Loader()
    assert await cache.get_many([5], healthy) == {5: "v5"}  # the next read loads afresh
    assert (broken.calls, healthy.calls) == ([[5]], [[5]])


async def test_a_reader_that_gives_up_does_not_cancel_the_shared_load() -> None:
    """The feed reads pulled authors under a timeout: one reader timing out must not fail
    the others waiting on the same load."""
    cache: CoalescingCache[int, str] = CoalescingCache(ttl_seconds=60.0)
    load = Loader(hold=True)
    impatient, patient = _get(cache, [9], load), _get(cache, [9], load)
    await eventually(lambda: cache.hits + cache.misses == 2)
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    load.release()
    assert await patient == {9: "v9"}
    assert await cache.get_many([9], load) == {9: "v9"}
    assert load.calls == [[9]]


async def test_the_cache_is_bounded() -> None:
    cache: CoalescingCache[int, str] = CoalescingCache(ttl_seconds=60.0, max_entries=3)
    load = Loader()
    await cache.get_many([1, 2, 3], load)
    await cache.get_many([4], load)  # over the bound: everything older goes
    await cache.get_many([1, 4], load)
    assert load.calls == [[1, 2, 3], [4], [1]]
