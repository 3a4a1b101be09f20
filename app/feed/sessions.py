"""Feed sessions: the ranked ids of a first page, frozen in Redis for a while.

Key `fs:{<viewer>}:<session>` (hash tag = the viewer, same slot as the timeline), a string:
"<tail>\n<ids>", where tail = "created_ms:post_id" of the oldest candidate in the window
(where RANKED scrolling continues as a keyset once the frozen ids run out) or empty, and ids
= packed 8-byte big-endian post ids in rank order. The TTL is the session's lifetime; a
missing key means expired.

One SET ... EX per session (not HSET + EXPIRE in MULTI/EXEC): one command on every RANKED
first page instead of four. A key left in the older hash format answers WRONGTYPE, which
the read path treats like a lost session (CURSOR_EXPIRED).
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
    return struct.pack(f">{len(ids)}Q", *ids)


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
        head = f"{tail[0]}:{tail[1]}" if tail else ""
        value = head.encode() + b"\n" + _pack(ids)
        await self.redis.set(_key(viewer_id, session_id), value, ex=self.ttl)
        return FeedSession(session_id, list(ids), tail)

    async def load(self, viewer_id: int, session_id: str) -> FeedSession | None:
        raw = await self.redis.get(_key(viewer_id, session_id))
        if raw is None:
            return None
        head, _, packed = raw.partition(b"\n")  # the tail is ASCII: the first newline splits
        tail = None
        if head:
            score, _, post_id = head.decode().partition(":")
            tail = (int(score), int(post_id))
        return FeedSession(session_id, _unpack(packed), tail)

    async def drop(self, viewer_id: int, session_id: str) -> None:
        await self.redis.delete(_key(viewer_id, session_id))
