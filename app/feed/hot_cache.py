"""A tiny in-process TTL cache with request coalescing, for hot keys.

A celebrity's `posts:{author}` is read by every follower's feed: with a 2 s cache and one
in-flight load per key, N concurrent readers in one process cause one Redis read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

from app.feed.constants import HOT_CACHE_MAX

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class CoalescingCache(Generic[K, V]):
    def __init__(self, ttl_seconds: float, max_entries: int = HOT_CACHE_MAX) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._values: dict[K, tuple[float, V]] = {}
        self._inflight: dict[K, asyncio.Task[dict[K, V]]] = {}
        self.hits = 0
        self.misses = 0

    async def get_many(
        self, keys: Sequence[K], load: Callable[[list[K]], Awaitable[dict[K, V]]]
    ) -> dict[K, V]:
        """Cached values for keys; misses load together, joining any load already running."""
        return (await self.get_many_counted(keys, load))[0]

    async def get_many_counted(
        self, keys: Sequence[K], load: Callable[[list[K]], Awaitable[dict[K, V]]]
    ) -> tuple[dict[K, V], int]:
        """get_many plus how many of these keys this call loaded itself (its misses).

        Per call, because the shared `hits`/`misses` totals move under concurrent callers.
        """
        now = time.monotonic()
        found: dict[K, V] = {}
        waits: dict[int, asyncio.Task[dict[K, V]]] = {}
        missing: list[K] = []
        for key in keys:
            cached = self._values.get(key)
            if cached is not None and cached[0] > now:
                found[key] = cached[1]
                self.hits += 1
            elif key in self._inflight:
                task = self._inflight[key]
                waits[id(task)] = task
                self.hits += 1
            else:
                missing.append(key)
        if missing:
            self.misses += len(missing)
            # The load runs as its own task: a caller that gives up (its timeout, a client
            # gone) cancels only its own wait, never the load the other callers share.
            task = asyncio.ensure_future(self._load(missing, load))
            task.add_done_callback(_retrieve)
            for key in missing:
                self._inflight[key] = task
            waits[id(task)] = task
        wanted = set(keys)
        for task in waits.values():
            loaded = await asyncio.shield(task)
            found.update({k: v for k, v in loaded.items() if k in wanted})
        return found, len(missing)

    async def _load(
        self, keys: list[K], load: Callable[[list[K]], Awaitable[dict[K, V]]]
    ) -> dict[K, V]:
        try:
            loaded = await load(keys)
            self._store(loaded)
            return loaded
        finally:
            this = asyncio.current_task()
            for key in keys:
                if self._inflight.get(key) is this:
                    del self._inflight[key]

    def _store(self, loaded: dict[K, V]) -> None:
        if len(self._values) + len(loaded) > self.max_entries:
            self._values.clear()  # crude but bounded; entries live seconds anyway
        expires = time.monotonic() + self.ttl
        for key, value in loaded.items():
            self._values[key] = (expires, value)

    def all_fresh(self, keys: Sequence[K]) -> bool:
        """Every key's value is cached and alive: `get_many` would answer without I/O."""
        now = time.monotonic()
        values = self._values
        for key in keys:
            held = values.get(key)
            if held is None or held[0] <= now:
                return False
        return True

    def fresh(self, key: K) -> V | None:
        """The value cached for key while it lives (None: none, or expired), without I/O."""
        held = self._values.get(key)
        return held[1] if held is not None and held[0] > time.monotonic() else None

    def last(self, key: K) -> V | None:
        """The value last stored for key, expired or not (None: none is held). A loader may
        hand back this very object when what it loaded is equal, so that callers comparing
        by identity see "unchanged" across reloads."""
        held = self._values.get(key)
        return None if held is None else held[1]

    def clear(self) -> None:
        self._values.clear()

    def invalidate(self, key: K) -> None:
        self._values.pop(key, None)


def _retrieve(task: asyncio.Task[object]) -> None:
    """Mark a load's failure as seen: every waiter re-raises it, and if all of them gave up
    there is nobody left to, which asyncio would log as 'exception never retrieved'."""
    if not task.cancelled():
        task.exception()
