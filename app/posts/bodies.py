"""Post body cache in Redis: `pb:<post_id>` = "<version>:<body>", a day's TTL.

The version travels with the body: hydration only accepts a cached body whose version equals
the row it just re-read from Postgres, so an edit is never shown stale even before the
PostEdited job deletes the key. Delete and visibility changes delete the key too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from redis.asyncio import Redis

TTL_SECONDS = 24 * 3600


def body_key(post_id: int) -> str:
    return f"pb:{int(post_id)}"


class BodyCache:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.hits = 0
        self.misses = 0

    async def get_many(
        self,
        versions: Mapping[int, int],
        load: Callable[[list[int]], Awaitable[dict[int, tuple[int, str]]]],
    ) -> dict[int, str]:
        """Bodies at exactly the given versions; misses come from `load` and are cached."""
        ids = list(versions)
        if not ids:
            return {}
        found: dict[int, str] = {}
        for post_id, raw in zip(
            ids, await self.redis.mget([body_key(i) for i in ids]), strict=True
        ):
            if raw is None:
                continue
            version, _, body = raw.decode().partition(":")
            if int(version) == versions[post_id]:
                found[post_id] = body
        missing = [i for i in ids if i not in found]
        self.hits += len(found)
        self.misses += len(missing)
        if missing:
            loaded = await load(missing)
            async with self.redis.pipeline(transaction=False) as pipe:
                for post_id, (version, body) in loaded.items():
                    pipe.set(body_key(post_id), f"{version}:{body}", ex=TTL_SECONDS)
                    found[post_id] = body
                await pipe.execute()
        return found

    async def invalidate(self, post_ids: Sequence[int]) -> None:
        if post_ids:
            await self.redis.delete(*(body_key(i) for i in post_ids))
