"""Post body cache in Redis: `pb:<post_id>` = "<version>:<body>", a day's TTL.

The version travels with the body: hydration only accepts a cached body whose version equals
the row it just re-read from Postgres, so an edit is never shown stale even before the
PostEdited job deletes the key. Delete and visibility changes delete the key too.

In front of Redis, each process keeps the bodies it served last (`LOCAL_ENTRIES`, ~25 MB at
~300 B a body): a body is immutable at a given version, so a local copy whose version equals
the row's is never stale and needs no invalidation; a deleted or hidden post never reaches
hydration (the SQL filter drops it first). A feed page whose posts were served by this
process lately then costs no Redis round trip for its bodies (measured: docs/benchmarks.md,
issue 10).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from redis.asyncio import Redis

TTL_SECONDS = 24 * 3600
LOCAL_ENTRIES = 65_536  # bodies kept in process; the oldest inserted go first


def body_key(post_id: int) -> str:
    return f"pb:{int(post_id)}"


class BodyCache:
    def __init__(self, redis: Redis, local_entries: int = LOCAL_ENTRIES) -> None:
        self.redis = redis
        self.hits = 0
        self.misses = 0
        self.local_hits = 0
        self.local_entries = local_entries
        self._local: dict[int, tuple[int, str]] = {}  # post id -> (version, body)

    def _remember(self, post_id: int, version: int, body: str) -> None:
        local = self._local
        if post_id not in local and len(local) >= self.local_entries > 0:
            del local[next(iter(local))]  # insertion order: the oldest copy goes
        if self.local_entries > 0:
            local[post_id] = (version, body)

    async def get_many(
        self,
        versions: Mapping[int, int],
        load: Callable[[list[int]], Awaitable[dict[int, tuple[int, str]]]],
    ) -> dict[int, str]:
        """Bodies at exactly the given versions; misses come from `load` and are cached."""
        found: dict[int, str] = {}
        local = self._local
        ids = []
        for post_id, version in versions.items():
            held = local.get(post_id)
            if held is not None and held[0] == version:
                found[post_id] = held[1]
            else:
                ids.append(post_id)
        self.local_hits += len(found)
        if not ids:
            return found
        for post_id, raw in zip(
            ids, await self.redis.mget([body_key(i) for i in ids]), strict=True
        ):
            if raw is None:
                continue
            version, _, body = raw.decode().partition(":")
            if int(version) == versions[post_id]:
                found[post_id] = body
                self._remember(post_id, versions[post_id], body)
        missing = [i for i in ids if i not in found]
        self.hits += len(ids) - len(missing)
        self.misses += len(missing)
        if missing:
            loaded = await load(missing)
            async with self.redis.pipeline(transaction=False) as pipe:
                for post_id, (version, body) in loaded.items():
                    pipe.set(body_key(post_id), f"{version}:{body}", ex=TTL_SECONDS)
                    found[post_id] = body
                    self._remember(post_id, version, body)
                await pipe.execute()
        return found

    async def invalidate(self, post_ids: Sequence[int]) -> None:
        """Drop the Redis copies (and this process's; other processes' copies are keyed by
        version, so an edit makes them unused, and hidden posts never reach them)."""
        for post_id in post_ids:
            self._local.pop(post_id, None)
        if post_ids:
            await self.redis.delete(*(body_key(i) for i in post_ids))
