"""The one owner of the Redis timeline keyspace (docs/redis-keys.md).

- `tl:{<user_id>}`: home timeline, newest `timeline_max` post ids.
- `posts:{<author_id>}`: recent posts of an author, same layout, newest `author_posts_max`.

Two layouts, chosen by `TIMELINE_ENCODING` (docs/decisions/0001-timeline-encoding.md):
- `packed` (default): a string, a format byte then 8-byte big-endian ids in ascending order
  (`app.timelines.packed`); ~9 B per entry, an insert is one GETRANGE + one APPEND;
- `zset`: member = post id (19 fixed-width digits), score = its creation ms; ~120 B per
  entry in a full (skiplist) timeline.
Every read and write understands both (a key keeps its layout until it is rewritten), so a
running system switches the setting and converts keys in the background (`convert`,
`python -m app.timelines convert`). The setting decides the layout of keys this store
creates or rewrites, and which layout a read tries first.

Braces are literal Redis Cluster hash tags. No other module builds these key strings or runs
commands on them.

Invariants kept by every method here, in both layouts:
- a timeline is its newest `timeline_max` entries in (created ms, id) order, which is id
  order: ids are time-ordered, and a score must equal its id's own millisecond
  (`created_at_ms(id)`, checked on write), so reads never need the score from Redis;
- bounded: a zset is trimmed in the same script as the ZADD; a packed string may carry up to
  `trim_slack` older entries in front of the newest `timeline_max` (the amortized trim drops
  them), which no read returns and no rewrite keeps;
- a missing key means "unknown, rebuild from Postgres"; a known-but-empty key holds only the
  EMPTY marker (zset: member "0000000000000000000", score 0; packed: the format byte alone)
  that readers never return;
- fan-out writes only into timelines that exist (by default): writing one post into a missing
  key would create a partial timeline that looks complete;
- replays change nothing visible: an id already in the timeline is not added again.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from app.config import get_settings
from app.posts.ids import EPOCH_MS, encode_post_id
from app.posts.ids import created_ms as created_at_ms
from app.redis_scripts import AnyRedis, LuaScript, run_script, run_script_many
from app.timelines import packed
from app.timelines.scripts import (
    CONVERT,
    EMPTY_MEMBER,
    PROBE_ENTRIES,
    PUSH_ENTRIES_PACKED,
    PUSH_ENTRIES_ZSET,
    PUSH_MANY_PACKED,
    PUSH_MANY_ZSET,
    REBUILD_PACKED,
    REBUILD_ZSET,
    REMOVE,
)

# The id layout lives in app.posts.ids; its epoch stays importable from here under this name
# (tests and benchmarks build ids with it), as do `created_at_ms` and `encode_post_id`.
POST_ID_EPOCH_MS = EPOCH_MS
_MAX_EXACT_SCORE = 2**53

Encoding = Literal["packed", "zset"]
ENCODINGS: tuple[Encoding, ...] = get_args(Encoding)
# SCAN patterns of the two families (the background conversion walks them).
TIMELINE_PATTERN = "tl:{*}"
AUTHOR_POSTS_PATTERN = "posts:{*}"

Entry = tuple[int, int]
"""(post_id, created_at_ms)."""


def timeline_key(user_id: int) -> str:
    """`tl:{<user_id>}`: the hash tag keeps all of one user's keys in one cluster slot."""
    return f"tl:{{{int(user_id)}}}"


# `timeline_key` as bytes, for the fan-out's 1,000-key script calls: redis-py encodes every
# str argument in Python, and building plus packing 1,000 str keys cost twice as much client
# CPU as bytes ones (the worker's largest cost per batch).
_TIMELINE_KEY_BYTES = b"tl:{%d}"


def timeline_keys(user_ids: Iterable[int]) -> list[bytes]:
    """`timeline_key` of many users, as bytes."""
    return [_TIMELINE_KEY_BYTES % int(u) for u in user_ids]


def author_posts_key(author_id: int) -> str:
    """`posts:{<author_id>}`: one author's recent posts."""
    return f"posts:{{{int(author_id)}}}"


def _check_score(score_ms: int) -> int:
    """Scores must be positive exact integers: 0 is the EMPTY marker, doubles lose >2^53."""
    score = int(score_ms)
    if not 0 < score < _MAX_EXACT_SCORE:
        raise ValueError(f"score out of range: {score_ms}")
    return score


def _check_entry(post_id: int, score_ms: int) -> tuple[int, str]:
    """(score, member) of a post; the score must be the id's own creation millisecond.

    Readers derive scores from ids instead of asking Redis for them (WITHSCORES formats every
    double and made a 21-entry page ~5x dearer in server time; the packed layout stores no
    score at all), so a score that disagrees with its id would corrupt keyset cursors:
    refuse it here.
    """
    member = encode_post_id(post_id)
    score = _check_score(score_ms)
    if score != created_at_ms(post_id):
        raise ValueError(
            f"score {score_ms} is not the creation ms of post {post_id} ({created_at_ms(post_id)})"
        )
    return score, member


def _to_int(raw: Any) -> int:
    """Parse an id reply (bytes, str or int) without any float rounding."""
    return raw if isinstance(raw, int) else int(raw)


def _parse_members(reply: Any) -> list[Entry]:
    """ZRANGE members as (post_id, created_at_ms); the EMPTY marker comes back as id 0."""
    out = []
    for raw in reply or ():
        pid = _to_int(raw)
        out.append((pid, created_at_ms(pid) if pid else 0))
    return out


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _checked_ids(entries: Iterable[Entry]) -> list[int]:
    ids = []
    for post_id, score_ms in entries:
        _check_entry(post_id, score_ms)
        ids.append(int(post_id))
    return ids


def _flat_entries(entries: Iterable[Entry]) -> list[Any]:
    """(post_id, score) pairs as ZADD arguments: score1, member1, score2, member2, ..."""
    args: list[Any] = []
    for post_id, score_ms in entries:
        args.extend(_check_entry(post_id, score_ms))
    return args


def _wrong_type(reply: Any) -> bool:
    """A key in the other layout (redis-py prefixes pipeline errors with the command)."""
    return isinstance(reply, ResponseError) and "WRONGTYPE" in str(reply)


def _kind(reply: Any) -> str:
    """A TYPE reply as text."""
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def _raise_errors(replies: Sequence[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


@dataclass(frozen=True)
class RawTimeline:
    """What `inspect` found under one key (operators' view, `python -m app.timelines`)."""

    key: str
    layout: str  # "packed", "zset" or "none"
    entries: list[Entry]  # visible entries, newest first
    hidden: int  # packed only: older entries past the bound, dropped at the next trim
    memory_bytes: int | None


class TimelineStore:
    """Bounded home timelines and author indexes in Redis (standalone or cluster).

    Batches of keys go to Redis as one EVALSHA per `script_batch` keys on a standalone server;
    on a cluster a multi-key script must stay in one slot, so keys are grouped by slot and the
    per-slot calls are pipelined (one round trip per node). The client must return bytes
    (`decode_responses=False`, as `app.redis_client.make_redis` builds it).
    """

    def __init__(
        self,
        redis: AnyRedis,
        timeline_max: int,
        author_posts_max: int,
        *,
        script_batch: int = 1000,
        encoding: Encoding | None = None,
        trim_slack: int | None = None,
    ) -> None:
        if timeline_max <= 0 or author_posts_max <= 0 or script_batch <= 0:
            raise ValueError("timeline_max, author_posts_max and script_batch must be positive")
        if encoding is None:
            encoding = get_settings().timeline_encoding
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown timeline encoding {encoding!r} (one of {ENCODINGS})")
        if trim_slack is not None and trim_slack <= 0:
            raise ValueError("trim_slack must be positive")
        self.redis = redis
        self.timeline_max = timeline_max
        self.author_posts_max = author_posts_max
        self.script_batch = script_batch
        self.encoding: Encoding = encoding
        self.packed = encoding == "packed"
        self.timeline_slack = trim_slack or packed.default_trim_slack(timeline_max)
        self.author_slack = trim_slack or packed.default_trim_slack(author_posts_max)
        self._cluster = isinstance(redis, RedisCluster)

    # -- script plumbing ------------------------------------------------------------------

    async def _eval(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        return await run_script(self.redis, script, keys, args)

    async def _eval_batches(
        self, script: LuaScript, batches: Sequence[Sequence[str | bytes]], args: Sequence[Any]
    ) -> list[Any]:
        """One script call per key batch, all pipelined (same args for every batch)."""
        return await run_script_many(self.redis, script, [(keys, args) for keys in batches])

    def _batches(self, keys: Sequence[str | bytes]) -> list[Sequence[str | bytes]]:
        """Key batches one script call may touch: by size, and by slot on a cluster."""
        if not self._cluster:
            return _chunks(keys, self.script_batch)
        assert isinstance(self.redis, RedisCluster)
        by_slot: dict[int, list[str | bytes]] = {}
        for key in keys:
            by_slot.setdefault(self.redis.keyslot(key), []).append(key)
        out: list[Sequence[str | bytes]] = []
        for group in by_slot.values():
            out.extend(_chunks(group, self.script_batch))
        return out

    # -- home timelines: writes -----------------------------------------------------------

    async def push_to_timelines(
        self,
        post_id: int,
        score_ms: int,
        user_ids: Sequence[int],
        *,
        only_existing: bool = True,
    ) -> int:
        """Fan one post into many timelines: insert + trim per key, one script call per batch.

        `score_ms` must be `created_at_ms(post_id)`. Returns how many timelines gained the
        post. Idempotent: a replay adds nothing. With `only_existing` (default) missing
        timelines are skipped: they are rebuilt from Postgres on read, and a single pushed
        post would make a partial timeline look complete.
        A post older than every entry of a full timeline is not kept (it still counts as
        added, as a zset's ZADD + trim would); the timeline keeps its newest `timeline_max`.
        """
        if not user_ids:
            return 0
        keys = timeline_keys(user_ids)
        args = self._push_args(
            post_id, score_ms, self.timeline_max, self.timeline_slack, only_existing
        )
        script = PUSH_MANY_PACKED if self.packed else PUSH_MANY_ZSET
        results = await self._eval_batches(script, self._batches(keys), args)
        return sum(int(r) for r in results)

    @staticmethod
    def _push_args(
        post_id: int, score_ms: int, max_entries: int, slack: int, only_existing: bool
    ) -> list[Any]:
        """PUSH_MANY_* arguments: the id in both layouts' forms, so a key of either layout
        is written without converting anything per key."""
        score, member = _check_entry(post_id, score_ms)
        only = 1 if only_existing else 0
        probe = str(-packed.ENTRY_BYTES * min(PROBE_ENTRIES, max_entries))
        return [
            packed.pack_ids([post_id]),
            max_entries,
            only,
            slack,
            score,
            member,
            EMPTY_MEMBER,
            probe,
        ]

    async def push_entries(
        self, user_id: int, entries: Sequence[Entry], *, create: bool = False
    ) -> int:
        """Merge entries into one timeline (follow backfill), trimmed to `timeline_max`.

        A missing timeline is left missing unless `create` (its rebuild will include these
        posts anyway). Returns entries added (an entry older than a full timeline counts, then
        is trimmed at once); -1 when the timeline was missing and not created.
        """
        return await self._push_entries(timeline_key(user_id), self.timeline_max, entries, create)

    async def rebuild(
        self, user_id: int, entries: Sequence[Entry], *, keep_since_ms: int | None = None
    ) -> int:
        """Atomically replace a timeline with `entries` (newest `timeline_max` kept).

        An empty rebuild leaves the EMPTY marker so `exists` is true and the user is not
        rebuilt on every read. `keep_since_ms`: keep entries already present with a score at
        or above it (fan-out writes that raced with the Postgres read that produced
        `entries`). Returns the number of entries kept.
        """
        return await self._rebuild(timeline_key(user_id), self.timeline_max, entries, keep_since_ms)

    async def remove_posts(self, user_id: int, post_ids: Sequence[int]) -> int:
        """Remove posts from one timeline (unfollow/block cleanup); never creates the key."""
        return await self.remove_posts_from_many(post_ids, [user_id])

    async def remove_posts_from_many(self, post_ids: Sequence[int], user_ids: Sequence[int]) -> int:
        """Remove posts from many timelines in batched script calls; returns members removed.

        A timeline emptied this way keeps the EMPTY marker (it is still complete).
        """
        keys = [timeline_key(u) for u in user_ids]
        return await self._remove(keys, self.timeline_max, post_ids)

    async def delete(self, user_id: int) -> None:
        """Forget a timeline (it is rebuilt from Postgres on the next read)."""
        await self.redis.delete(timeline_key(user_id))

    # -- home timelines: reads ------------------------------------------------------------

    async def exists(self, user_id: int) -> bool:
        """True when the timeline is materialized (possibly known-empty)."""
        return bool(await self.redis.exists(timeline_key(user_id)))

    async def count(self, user_id: int) -> int:
        """Real entries in a timeline (the EMPTY marker is not counted)."""
        key = timeline_key(user_id)
        strlen = ("STRLEN", key)
        zcount = ("ZCOUNT", key, "(0", "+inf")
        first, other = (strlen, zcount) if self.packed else (zcount, strlen)
        try:
            reply = await self.redis.execute_command(*first)
            is_packed = self.packed
        except ResponseError as exc:
            if not _wrong_type(exc):
                raise
            reply = await self.redis.execute_command(*other)
            is_packed = not self.packed
        if is_packed:
            return min(packed.entry_count(int(reply)), self.timeline_max)
        return int(reply)

    async def latest(self, user_id: int, limit: int) -> list[Entry]:
        """Newest entries first, (post_id, created_at_ms); [] when missing or empty."""
        return await self._latest(timeline_key(user_id), self.timeline_max, limit) or []

    async def latest_many(self, user_ids: Sequence[int], limit: int) -> dict[int, list[Entry]]:
        """Newest entries of many timelines in one pipeline; a missing one maps to []."""
        ids = list(dict.fromkeys(user_ids))
        if not ids or limit <= 0:
            return {u: [] for u in ids}
        found = await self._latest_many([timeline_key(u) for u in ids], self.timeline_max, limit)
        return {u: rows or [] for u, rows in zip(ids, found, strict=True)}

    async def latest_or_none(self, user_id: int, limit: int) -> list[Entry] | None:
        """Like `latest` in one round trip, but None when the timeline is missing (rebuild)."""
        return await self._latest(timeline_key(user_id), self.timeline_max, limit)

    async def before(self, user_id: int, score_ms: int, post_id: int, limit: int) -> list[Entry]:
        """Keyset page: entries strictly older than (score_ms, post_id), newest first.

        Order is (score desc, post id desc). The score bound is inclusive with an id
        tie-break, so posts sharing a millisecond are neither lost nor repeated.
        """
        return await self._before(
            timeline_key(user_id), self.timeline_max, score_ms, post_id, limit
        )

    # -- author indexes -------------------------------------------------------------------

    async def push_author_post(self, author_id: int, post_id: int, score_ms: int) -> int:
        """Add a post to `posts:{author}`: one write whatever the follower count (pull mode)."""
        args = self._push_args(post_id, score_ms, self.author_posts_max, self.author_slack, False)
        script = PUSH_MANY_PACKED if self.packed else PUSH_MANY_ZSET
        return int(await self._eval(script, [author_posts_key(author_id)], args))

    async def rebuild_author(
        self, author_id: int, entries: Sequence[Entry], *, keep_since_ms: int | None = None
    ) -> int:
        """Atomically replace an author index (e.g. on a push->pull switch or after loss)."""
        key = author_posts_key(author_id)
        return await self._rebuild(key, self.author_posts_max, entries, keep_since_ms)

    async def author_exists(self, author_id: int) -> bool:
        return bool(await self.redis.exists(author_posts_key(author_id)))

    async def author_latest(self, author_id: int, limit: int) -> list[Entry]:
        """An author's newest posts first; [] when the index is missing or empty."""
        return await self._latest(author_posts_key(author_id), self.author_posts_max, limit) or []

    async def author_latest_many(
        self, author_ids: Sequence[int], limit: int
    ) -> dict[int, list[Entry]]:
        """Newest posts of many authors in one pipeline; a missing index maps to []."""
        found = await self.author_latest_many_or_none(author_ids, limit)
        return {a: rows or [] for a, rows in found.items()}

    async def author_latest_many_or_none(
        self, author_ids: Sequence[int], limit: int
    ) -> dict[int, list[Entry] | None]:
        """Like `author_latest_many`, but None for a missing index (read Postgres instead)."""
        ids = list(dict.fromkeys(author_ids))
        if not ids:
            return {}
        if limit <= 0:
            return {a: [] for a in ids}
        keys = [author_posts_key(a) for a in ids]
        found = await self._latest_many(keys, self.author_posts_max, limit)
        return dict(zip(ids, found, strict=True))

    async def remove_author_post(self, author_id: int, post_id: int) -> int:
        """Drop a post from its author's index (delete); an emptied index stays known-empty."""
        return await self._remove([author_posts_key(author_id)], self.author_posts_max, [post_id])

    # -- operators: inspection and the background conversion ------------------------------

    async def inspect(self, key: str, max_entries: int) -> RawTimeline:
        """Everything one key holds, in whichever layout (`python -m app.timelines show`)."""
        kind = (await self.redis.type(key)).decode()
        memory = await self.redis.memory_usage(key, samples=0) if kind != "none" else None
        if kind == "string":
            body = packed.entries_of(await self.redis.get(key) or b"")
            total = len(body) // packed.ENTRY_BYTES
            hidden = max(0, total - max_entries)
            return RawTimeline(key, "packed", packed.newest_first(body, hidden), hidden, memory)
        if kind == "zset":
            members = await self.redis.zrange(key, 0, -1, desc=True)
            rows = [e for e in _parse_members(members) if e[0]]
            return RawTimeline(key, "zset", rows, 0, memory)
        return RawTimeline(key, kind, [], 0, memory)

    async def convert(self, keys: Sequence[str], max_entries: int, target: Encoding) -> int:
        """Rewrite keys into `target` layout (atomic per key, idempotent); returns how many
        changed. Missing keys stay missing; keys already in `target` are left alone.

        The parsing happens here, not in Redis: one pipeline reads the keys, then one swaps
        each key that still holds what was read (a key written in between is read again, up
        to 3 times, then left for the next run)."""
        done = 0
        pending = list(keys)
        for _ in range(3):
            if not pending:
                break
            read = "ZRANGE" if target == "packed" else "GET"
            kinds = await self._pipeline([("TYPE", k) for k in pending])
            other = "zset" if target == "packed" else "string"
            todo = [k for k, kind in zip(pending, kinds, strict=True) if _kind(kind) == other]
            if not todo:
                break
            cmds = [(read, k, 0, -1) if read == "ZRANGE" else (read, k) for k in todo]
            replies = await self._pipeline(cmds)
            calls: list[tuple[Sequence[Any], Sequence[Any]]] = []
            for key, reply in zip(todo, replies, strict=True):
                if isinstance(reply, Exception) or reply is None:
                    continue  # changed type or vanished since TYPE: the next pass sees it
                calls.append(([key], self._swap_args(target, reply, max_entries)))
            swapped = await run_script_many(self.redis, CONVERT, calls)
            done += sum(int(r) for r in swapped)
            pending = [c[0][0] for c, r in zip(calls, swapped, strict=True) if not int(r)]
        return done

    @staticmethod
    def _swap_args(target: Encoding, reply: Any, max_entries: int) -> list[Any]:
        if target == "packed":
            members = list(reply)
            digest = hashlib.sha1(b",".join(members)).hexdigest()
            ids = [int(m) for m in members if m != EMPTY_MEMBER.encode()][-max_entries:]
            return [target, digest, packed.pack_ids(ids)]
        body = packed.entries_of(reply)
        start = max(0, len(body) // packed.ENTRY_BYTES - max_entries)
        args: list[Any] = [target, reply, EMPTY_MEMBER]
        for post_id, ms in packed.newest_first(body, start):
            args += [ms, encode_post_id(post_id)]
        return args

    async def scan_keys(self, pattern: str, count: int = 1000) -> AsyncIterator[list[str]]:
        """Keys matching one of the patterns above, a SCAN page at a time (every primary on a
        cluster)."""
        page: list[str] = []
        async for raw in self.redis.scan_iter(match=pattern, count=count):
            page.append(raw.decode() if isinstance(raw, bytes) else str(raw))
            if len(page) >= count:
                yield page
                page = []
        if page:
            yield page

    # -- shared implementations -----------------------------------------------------------

    async def _push_entries(
        self, key: str, max_entries: int, entries: Sequence[Entry], create: bool
    ) -> int:
        if not entries:
            return 0
        if self.packed:
            body = packed.pack_ids(_checked_ids(entries))
            args: list[Any] = [max_entries, 1 if create else 0, EMPTY_MEMBER, body]
            return int(await self._eval(PUSH_ENTRIES_PACKED, [key], args))
        args = [max_entries, 1 if create else 0, EMPTY_MEMBER, *_flat_entries(entries)]
        return int(await self._eval(PUSH_ENTRIES_ZSET, [key], args))

    async def _rebuild(
        self, key: str, max_entries: int, entries: Sequence[Entry], keep_since_ms: int | None
    ) -> int:
        keep = "" if keep_since_ms is None else _check_score(keep_since_ms)
        if self.packed:
            # Only the newest max_entries can survive the trim: do not ship the rest.
            ids = sorted(set(_checked_ids(entries)))[-max_entries:]
            args: list[Any] = [max_entries, keep, EMPTY_MEMBER, packed.pack_ids(ids)]
            return int(await self._eval(REBUILD_PACKED, [key], args))
        newest = sorted(entries, key=lambda e: (e[1], e[0]), reverse=True)[:max_entries]
        args = [max_entries, keep, EMPTY_MEMBER, *_flat_entries(newest)]
        return int(await self._eval(REBUILD_ZSET, [key], args))

    async def _remove(self, keys: Sequence[str], max_entries: int, post_ids: Sequence[int]) -> int:
        ids = sorted(set(post_ids))
        if not ids or not keys:
            return 0
        total = 0
        for chunk in _chunks(ids, 1000):
            args = [EMPTY_MEMBER, max_entries, packed.pack_ids(chunk)]
            args += [encode_post_id(p) for p in chunk]
            results = await self._eval_batches(REMOVE, self._batches(keys), args)
            total += sum(int(r) for r in results)
        return total

    # Reads: one command per key in the configured layout; a key still in the other layout
    # answers WRONGTYPE and is read again in its own (only while a conversion runs).

    @staticmethod
    def _packed_latest_cmd(key: str, max_entries: int, limit: int) -> tuple[Any, ...]:
        # The last 8 n bytes are the newest n entries; a shorter string comes back whole,
        # format byte included (a lone format byte: known empty; nothing: missing).
        return ("GETRANGE", key, -packed.ENTRY_BYTES * min(limit, max_entries), -1)

    @staticmethod
    def _zset_latest_cmd(key: str, limit: int) -> tuple[Any, ...]:
        # -inf includes the EMPTY marker, which tells "known empty" from "missing" in one call;
        # limit + 1 so the marker never costs a real row.
        return ("ZRANGE", key, "+inf", "-inf", "BYSCORE", "REV", "LIMIT", 0, limit + 1)

    @staticmethod
    def _packed_rows(reply: Any, limit: int) -> list[Entry] | None:
        if not reply:
            return None
        return packed.newest_first(packed.entries_of(reply))[:limit]

    @staticmethod
    def _zset_rows(reply: Any, limit: int) -> list[Entry] | None:
        rows = _parse_members(reply)
        if not rows:
            return None
        return [r for r in rows if r[1] > 0][:limit]

    def _latest_cmds(
        self, key: str, max_entries: int, limit: int, packed_first: bool
    ) -> tuple[tuple[Any, ...], Any]:
        if packed_first:
            return self._packed_latest_cmd(key, max_entries, limit), self._packed_rows
        return self._zset_latest_cmd(key, limit), self._zset_rows

    async def _latest(self, key: str, max_entries: int, limit: int) -> list[Entry] | None:
        if limit <= 0:
            return [] if await self.redis.exists(key) else None
        cmd, rows = self._latest_cmds(key, max_entries, limit, self.packed)
        try:
            reply = await self.redis.execute_command(*cmd)
        except ResponseError as exc:
            if not _wrong_type(exc):
                raise
            cmd, rows = self._latest_cmds(key, max_entries, limit, not self.packed)
            reply = await self.redis.execute_command(*cmd)
        return cast(list[Entry] | None, rows(reply, limit))

    async def _latest_many(
        self, keys: Sequence[str], max_entries: int, limit: int
    ) -> list[list[Entry] | None]:
        layouts = [self.packed] * len(keys)
        replies = await self._pipeline(
            [self._latest_cmds(k, max_entries, limit, self.packed)[0] for k in keys]
        )
        other = [i for i, r in enumerate(replies) if _wrong_type(r)]
        if other:
            again = await self._pipeline(
                [self._latest_cmds(keys[i], max_entries, limit, not self.packed)[0] for i in other]
            )
            for i, reply in zip(other, again, strict=True):
                replies[i], layouts[i] = reply, not self.packed
        _raise_errors(replies)
        return [
            (self._packed_rows if is_packed else self._zset_rows)(reply, limit)
            for reply, is_packed in zip(replies, layouts, strict=True)
        ]

    async def _pipeline(self, cmds: Sequence[tuple[Any, ...]]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for cmd in cmds:
            pipe.execute_command(*cmd)
        return list(await pipe.execute(raise_on_error=False))

    async def _before(
        self, key: str, max_entries: int, score_ms: int, post_id: int, limit: int
    ) -> list[Entry]:
        if limit <= 0:
            return []
        score = _check_score(score_ms)
        first, other = (
            (self._packed_before, self._zset_before)
            if self.packed
            else (self._zset_before, self._packed_before)
        )
        try:
            return await first(key, max_entries, score, post_id, limit)
        except ResponseError as exc:
            if not _wrong_type(exc):
                raise
            return await other(key, max_entries, score, post_id, limit)

    async def _packed_before(
        self, key: str, max_entries: int, score: int, post_id: int, limit: int
    ) -> list[Entry]:
        # One GETRANGE of the visible entries (<= 6.4 KB for 800), a binary search for the
        # cursor's place and a parse of the page only. Entries are in (ms, id) order, so
        # "strictly older than (score, id)" is "below one id bound".
        reply = await self.redis.execute_command(
            "GETRANGE", key, -packed.ENTRY_BYTES * max_entries, -1
        )
        body = packed.entries_of(reply or b"")
        end = packed.count_below(body, packed.keyset_bound(score, post_id))
        return packed.newest_first(body, max(0, end - limit), end)

    async def _zset_before(
        self, key: str, max_entries: int, score: int, post_id: int, limit: int
    ) -> list[Entry]:
        # One round trip, two ranges: the cursor's own millisecond (inclusive bound; its ids at
        # or above the cursor were served already) and everything strictly older. A long run
        # of equal scores costs rows, never correctness; no Lua, so no per-call script cost.
        pipe = self.redis.pipeline(transaction=False)
        pipe.execute_command("ZRANGE", key, score, score, "BYSCORE", "REV")
        pipe.execute_command("ZRANGE", key, f"({score}", "(0", "BYSCORE", "REV", "LIMIT", 0, limit)
        same, older = await pipe.execute()
        rows = [e for e in _parse_members(same) if e[0] < post_id]
        return (rows + _parse_members(older))[:limit]
