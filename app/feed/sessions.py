"""Feed sessions: the ranked ids of a first page, frozen in Redis for a while.

Key `fs:{<viewer>}:<session>` (hash tag = the viewer, same slot as the timeline): field
`ids` = packed 8-byte big-endian post ids in rank order, `tail` = "created_ms:post_id" of
the oldest candidate in the window, where RANKED scrolling continues as a keyset once the
frozen ids run out. The TTL is the session's lifetime; a missing key means expired.
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

_ID = struct.Struct(">Q")


@dataclass(frozen=True)
class FeedSession:
    session_id: str
    ids: list[int]
    tail: tuple[int, int] | None  # (created_ms, post_id) or None when the window held all


def _key(viewer_id: int, session_id: str) -> str:
    return f"fs:{{{int(viewer_id)}}}:{session_id}"


def _pack(ids: Sequence[int]) -> bytes:
    return b"".join(_ID.pack(i) for i in ids)


def _unpack(raw: bytes) -> list[int]:
    return [v for (v,) in _ID.iter_unpack(raw)]


class FeedSessionStore:
    def __init__(self, redis: Redis, ttl_seconds: int) -> None:
        self.redis = redis
        self.ttl = ttl_seconds

    async def create(
        self, viewer_id: int, ids: Sequence[int], tail: tuple[int, int] | None
    ) -> FeedSession:
        session_id = secrets.token_urlsafe(9)
        key = _key(viewer_id, session_id)
        fields = {"ids": _pack(ids), "tail": f"{tail[0]}:{tail[1]}" if tail else ""}
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=fields)
            pipe.expire(key, self.ttl)
            await pipe.execute()
        return FeedSession(session_id, list(ids), tail)

    async def load(self, viewer_id: int, session_id: str) -> FeedSession | None:
        raw_ids, raw_tail = await self.redis.hmget(_key(viewer_id, session_id), ["ids", "tail"])
        if raw_ids is None:
            return None
        tail = None
        if raw_tail:
            score, _, post_id = raw_tail.decode().partition(":")
            tail = (int(score), int(post_id))
        return FeedSession(session_id, _unpack(raw_ids), tail)

    async def drop(self, viewer_id: int, session_id: str) -> None:
        await self.redis.delete(_key(viewer_id, session_id))
