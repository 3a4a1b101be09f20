"""Feed sessions: the ranked ids of a first page, frozen in Redis for a while.

Key `fs:{<viewer>}:<session>` (hash tag = the viewer, same slot as the timeline), a string:
"<head>\n<ids><recommended>", where head = "<tail>" or "<tail>;<model>;<arm>;<n>": tail =
"created_ms:post_id" of the oldest candidate in the window (where RANKED scrolling continues
as a keyset once the frozen ids run out) or empty; model and arm = the ranking model version
and experiment arm the session was ranked with (a reload never reorders an open session);
n = how many of the ids came from the recommendation source. ids = packed 8-byte big-endian
post ids in rank order, followed by those n recommended ids (packed, ascending): later pages
filter them by the recommendation rule, the others by the home-feed rule. A session written
before the model fields existed has a head without ';'. The TTL is the session's lifetime; a
missing key means expired.

One script call per new session (`CREATE`): SET ... EX of the session, and its id in the
viewer's index `fsi:{<viewer>}` (a zset, score = creation ms); past FEED_SESSIONS_PER_VIEWER
entries the oldest sessions are deleted, so their cursors answer CURSOR_EXPIRED and a loop of
aliased `feed(first: 1)` holds at most that many ~4 KB sessions per viewer. The index lives
as long as the newest session; a session renewed (below) past its index's life is simply
no longer counted, bounded by its own TTL. A key left in the older hash format answers
WRONGTYPE, which the read path treats like a lost session (CURSOR_EXPIRED).

A RANKED first page with nothing new since a session was frozen answers from that session
again: `OpenSessions` remembers, in process, each viewer's last session and a signature of
the candidates it was ranked from, and `renew` reads the session and restarts its lifetime
in one GETEX, so the cursors of that page live FEED_SESSION_TTL_SECONDS like a new one's.
"""

from __future__ import annotations

import hashlib
import secrets
import struct
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from app.feed.constants import OPEN_SESSIONS_MAX
from app.posts.regions import current_region
from app.redis_scripts import AnyRedis, LuaScript, run_script

_ID = struct.Struct(">Q")


@dataclass(frozen=True)
class SessionRanking:
    """What a session was ranked with and from: carried with it, so every later page of the
    scroll is read as the first was."""

    model: str = ""  # the ranking model version ("" before models existed)
    arm: str = ""  # the experiment arm the viewer was in ("" without an experiment)
    recommended: frozenset[int] = frozenset()  # ids from the recommendation source


NO_RANKING = SessionRanking()


@dataclass(frozen=True)
class FeedSession:
    session_id: str
    ids: list[int]
    tail: tuple[int, int] | None  # (created_ms, post_id) or None when the window held all
    ranking: SessionRanking = NO_RANKING


def _key(viewer_id: int, session_id: str) -> str:
    return f"fs:{{{int(viewer_id)}}}:{session_id}"


def _index_key(viewer_id: int) -> str:
    return f"fsi:{{{int(viewer_id)}}}"


# KEYS: the session, the viewer's index. ARGV: value, ttl s, now ms, cap, session id.
# Returns the ids of the sessions ended past the cap: the caller deletes them (a script may
# touch only the keys it declares, which a cluster routes by).
CREATE = LuaScript(
    "feed_session_create",
    """
local ttl, now, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('SET', KEYS[1], ARGV[1], 'EX', ttl)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - ttl * 1000))
redis.call('ZADD', KEYS[2], now, ARGV[5])
local extra = redis.call('ZCARD', KEYS[2]) - cap
local ended = {}
if extra > 0 then
  ended = redis.call('ZRANGE', KEYS[2], 0, extra - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1)
end
redis.call('EXPIRE', KEYS[2], ttl)
return ended
""",
)


def _pack(ids: Sequence[int]) -> bytes:
    return struct.pack(f">{len(ids)}Q", *ids)


def _unpack(raw: bytes) -> list[int]:
    # One C call: 7 us for a 500-id session, against 18 us for iter_unpack's tuples.
    if len(raw) % _ID.size:
        raise struct.error("a session's ids are 8 bytes each")
    return list(struct.unpack(f">{len(raw) // _ID.size}Q", raw))


class FeedSessionStore:
    def __init__(self, redis: AnyRedis, ttl_seconds: int, per_viewer: int = 10) -> None:
        self.redis = redis
        self.ttl = ttl_seconds
        self.per_viewer = per_viewer  # FEED_SESSIONS_PER_VIEWER

    @staticmethod
    def new_id() -> str:
        """A fresh session id, so a page can be built from a session while it is written."""
        return secrets.token_urlsafe(9)

    async def create(
        self,
        viewer_id: int,
        ids: Sequence[int],
        tail: tuple[int, int] | None,
        session_id: str | None = None,
        ranking: SessionRanking = NO_RANKING,
    ) -> FeedSession:
        """Store a new session; past `per_viewer` open ones the viewer's oldest end."""
        session_id = session_id or self.new_id()
        value = _encode(ids, tail, ranking)
        key = _key(viewer_id, session_id)
        args = [value, self.ttl, int(time.time() * 1000), self.per_viewer, session_id]
        ended = await run_script(self.redis, CREATE, [key, _index_key(viewer_id)], args)
        if ended:  # one slot (the viewer's hash tag): one DEL on a cluster too
            await self.redis.delete(*(_key(viewer_id, _text(old)) for old in ended))
        return FeedSession(session_id, list(ids), tail, ranking)

    async def load(self, viewer_id: int, session_id: str) -> FeedSession | None:
        return _decode(
            session_id, cast(bytes | None, await self.redis.get(_key(viewer_id, session_id)))
        )

    async def renew(self, viewer_id: int, session_id: str) -> FeedSession | None:
        """`load`, and the session lives FEED_SESSION_TTL_SECONDS from now (one GETEX)."""
        raw = await self.redis.getex(_key(viewer_id, session_id), ex=self.ttl)
        return _decode(session_id, cast(bytes | None, raw))

    def renew_command(self, viewer_id: int, session_id: str) -> tuple[Any, ...]:
        """The command `renew` sends, for a caller that pipelines it with other reads of the
        viewer's slot; `decode` reads its reply."""
        return ("GETEX", _key(viewer_id, session_id), "EX", self.ttl)

    @staticmethod
    def decode(session_id: str, reply: Any) -> FeedSession | None:
        """A session from a GET/GETEX reply (a pipeline's, errors left in place: raised)."""
        if isinstance(reply, Exception):
            raise reply
        return _decode(session_id, reply)

    async def drop(self, viewer_id: int, session_id: str) -> None:
        await self.redis.delete(_key(viewer_id, session_id))


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _encode(ids: Sequence[int], tail: tuple[int, int] | None, ranking: SessionRanking) -> bytes:
    head = f"{tail[0]}:{tail[1]}" if tail else ""
    if ranking == NO_RANKING:
        return head.encode() + b"\n" + _pack(ids)
    for name in (ranking.model, ranking.arm):
        if ";" in name or "\n" in name:
            raise ValueError(f"a model version or arm holds no ';' or newline: {name!r}")
    recommended = sorted(ranking.recommended)
    head += f";{ranking.model};{ranking.arm};{len(recommended)}"
    return head.encode() + b"\n" + _pack(ids) + _pack(recommended)


def _decode(session_id: str, raw: bytes | None) -> FeedSession | None:
    if raw is None:
        return None
    head, _, packed = raw.partition(b"\n")  # the head is ASCII: the first newline splits
    text = head.decode()
    ranking = NO_RANKING
    if ";" in text:
        text, model, arm, count = text.split(";")
        n = int(count)
        cut = len(packed) - n * _ID.size
        if n < 0 or cut < 0:
            raise struct.error("a session's recommended ids overrun it")
        ranking = SessionRanking(model, arm, frozenset(_unpack(packed[cut:])))
        packed = packed[:cut]
    tail = None
    if text:
        score, _, post_id = text.partition(":")
        tail = (int(score), int(post_id))
    return FeedSession(session_id, _unpack(packed), tail, ranking)


def candidates_signature(ids: Sequence[int], maybe_more: bool) -> bytes:
    """16 bytes that change when the candidate ids (or whether older ones exist) do, or the
    region judging the request (app.posts.regions): a session ranked under one region's
    policy is never reused for a request judged in another (decision 0088)."""
    digest = hashlib.blake2b(array("q", ids).tobytes(), digest_size=16)
    digest.update(b"+" if maybe_more else b".")
    digest.update(current_region().encode())
    return digest.digest()


@dataclass(slots=True)
class OpenSession:
    session_id: str
    signature: bytes  # candidates_signature of the candidates the session was ranked from
    frozen_at: float  # time.monotonic()
    # The viewer's new-post count was reset after a first page that read these candidates.
    reset_done: bool = False


class OpenSessions:
    """viewer -> their last RANKED session in this process and what it was ranked from;
    at most `max_entries` viewers (every entry lives the same time: the oldest go first).

    In process on purpose: deciding costs no I/O. A viewer whose refresh lands on another
    API process simply gets a new session there, as before."""

    def __init__(self, max_age_seconds: float, max_entries: int = OPEN_SESSIONS_MAX) -> None:
        self.max_age = max_age_seconds
        self.max_entries = max_entries
        self._open: dict[int, OpenSession] = {}

    def __len__(self) -> int:
        return len(self._open)

    def matching(self, viewer_id: int, signature: bytes) -> OpenSession | None:
        """The viewer's open session if it was ranked from these very candidates and is
        younger than `max_age_seconds`."""
        found = self._open.get(viewer_id)
        if found is None or found.signature != signature:
            return None
        if time.monotonic() - found.frozen_at > self.max_age:
            del self._open[viewer_id]
            return None
        return found

    def peek(self, viewer_id: int) -> OpenSession | None:
        """The viewer's open session younger than `max_age_seconds`, whatever it was ranked
        from (a first page reads it with its other first reads, before its candidates)."""
        found = self._open.get(viewer_id)
        if found is None or time.monotonic() - found.frozen_at > self.max_age:
            return None
        return found

    def remember(self, viewer_id: int, session_id: str, signature: bytes) -> None:
        self._open.pop(viewer_id, None)
        self._open[viewer_id] = OpenSession(session_id, signature, time.monotonic())
        while len(self._open) > self.max_entries:
            del self._open[next(iter(self._open))]

    def get(self, viewer_id: int, session_id: str | None) -> OpenSession | None:
        """The viewer's open session if it is `session_id`."""
        found = self._open.get(viewer_id)
        return found if found is not None and found.session_id == session_id else None

    def reset_done(self, viewer_id: int, session_id: str) -> None:
        found = self.get(viewer_id, session_id)
        if found is not None:
            found.reset_done = True

    def forget(self, viewer_id: int) -> None:
        self._open.pop(viewer_id, None)

    def clear(self) -> None:
        self._open.clear()
