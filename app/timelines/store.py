"""The one owner of the Redis timeline keyspace (docs/redis-keys.md).

- `tl:{<user_id>}`: home timeline, zset, member = post id, score = created_at ms.
- `posts:{<author_id>}`: recent posts of an author, same encoding.

Braces are literal Redis Cluster hash tags. No other module builds these key strings or runs
commands on them. Encoding choice and figures: docs/decisions/0001-timeline-encoding.md.

Invariants kept by every method here:
- members are post ids as 19 fixed-width decimal digits (so equal scores order like ids),
  scores are created_at ms as exact integers (< 2^53; never the 64-bit id itself) and always
  equal the id's own millisecond (`created_at_ms(id)`, checked on write), so reads fetch
  members only and derive scores: WITHSCORES formats every double and costs ~5x the range;
- a timeline holds at most `timeline_max` entries, trimmed in the same script as the ZADD;
- a missing key means "unknown, rebuild from Postgres"; a known-but-empty key holds only the
  EMPTY marker (member "0000000000000000000", score 0) that readers never return;
- fan-out writes only into timelines that exist (by default): writing one post into a missing
  key would create a partial timeline that looks complete.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster

from app.posts.ids import EPOCH_MS, encode_post_id
from app.posts.ids import created_ms as created_at_ms
from app.redis_scripts import AnyRedis, LuaScript, run_script, run_script_many
from app.timelines.scripts import EMPTY_MEMBER, PUSH_ENTRIES, PUSH_MANY, REBUILD, REMOVE

# The id layout lives in app.posts.ids; its epoch stays importable from here under this name
# (tests and benchmarks build ids with it), as do `created_at_ms` and `encode_post_id`.
POST_ID_EPOCH_MS = EPOCH_MS
_MAX_EXACT_SCORE = 2**53

Entry = tuple[int, int]
"""(post_id, created_at_ms)."""


def timeline_key(user_id: int) -> str:
    """`tl:{<user_id>}`: the hash tag keeps all of one user's keys in one cluster slot."""
    return f"tl:{{{int(user_id)}}}"


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
    double and made a 21-entry page ~5x dearer in server time), so a score that disagrees
    with its id would corrupt keyset cursors: refuse it here.
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


def _flat_entries(entries: Iterable[Entry]) -> list[Any]:
    """(post_id, score) pairs as ZADD arguments: score1, member1, score2, member2, ..."""
    args: list[Any] = []
    for post_id, score_ms in entries:
        args.extend(_check_entry(post_id, score_ms))
    return args


class TimelineStore:
    """Bounded home timelines and author indexes in Redis (standalone or cluster).

    Batches of keys go to Redis as one EVALSHA per `script_batch` keys on a standalone server;
    on a cluster a multi-key script must stay in one slot, so keys are grouped by slot and the
    per-slot calls are pipelined (one round trip per node).
    """

    def __init__(
        self,
        redis: AnyRedis,
        timeline_max: int,
        author_posts_max: int,
        *,
        script_batch: int = 1000,
    ) -> None:
        if timeline_max <= 0 or author_posts_max <= 0 or script_batch <= 0:
            raise ValueError("timeline_max, author_posts_max and script_batch must be positive")
        self.redis = redis
        self.timeline_max = timeline_max
        self.author_posts_max = author_posts_max
        self.script_batch = script_batch
        self._cluster = isinstance(redis, RedisCluster)

    # -- script plumbing ------------------------------------------------------------------

    async def _eval(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        return await run_script(self.redis, script, keys, args)

    async def _eval_batches(
        self, script: LuaScript, batches: Sequence[Sequence[str]], args: Sequence[Any]
    ) -> list[Any]:
        """One script call per key batch, all pipelined (same args for every batch)."""
        return await run_script_many(self.redis, script, [(keys, args) for keys in batches])

    def _batches(self, keys: Sequence[str]) -> list[Sequence[str]]:
        """Key batches one script call may touch: by size, and by slot on a cluster."""
        if not self._cluster:
            return _chunks(keys, self.script_batch)
        assert isinstance(self.redis, RedisCluster)
        by_slot: dict[int, list[str]] = {}
        for key in keys:
            by_slot.setdefault(self.redis.keyslot(key), []).append(key)
        out: list[Sequence[str]] = []
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
        """Fan one post into many timelines: ZADD + trim per key, one script call per batch.

        `score_ms` must be `created_at_ms(post_id)`. Returns how many timelines gained the
        post. Idempotent: a replay adds nothing. With `only_existing` (default) missing
        timelines are skipped: they are rebuilt from Postgres on read, and a single pushed
        post would make a partial timeline look complete.
        A post older than every entry of a full timeline is added then trimmed at once (it
        still counts as added); the timeline keeps the newest `timeline_max` entries.
        """
        if not user_ids:
            return 0
        args = [
            *_check_entry(post_id, score_ms),
            self.timeline_max,
            1 if only_existing else 0,
            EMPTY_MEMBER,
        ]
        keys = [timeline_key(u) for u in user_ids]
        results = await self._eval_batches(PUSH_MANY, self._batches(keys), args)
        return sum(int(r) for r in results)

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
        return await self._remove([timeline_key(u) for u in user_ids], post_ids)

    async def delete(self, user_id: int) -> None:
        """Forget a timeline (it is rebuilt from Postgres on the next read)."""
        await self.redis.delete(timeline_key(user_id))

    # -- home timelines: reads ------------------------------------------------------------

    async def exists(self, user_id: int) -> bool:
        """True when the timeline is materialized (possibly known-empty)."""
        return bool(await self.redis.exists(timeline_key(user_id)))

    async def count(self, user_id: int) -> int:
        """Real entries in a timeline (the EMPTY marker is not counted)."""
        return int(await self.redis.zcount(timeline_key(user_id), "(0", "+inf"))

    async def latest(self, user_id: int, limit: int) -> list[Entry]:
        """Newest entries first, (post_id, created_at_ms); [] when missing or empty."""
        return await self._latest(timeline_key(user_id), limit) or []

    async def latest_many(self, user_ids: Sequence[int], limit: int) -> dict[int, list[Entry]]:
        """Newest entries of many timelines in one pipeline; a missing one maps to []."""
        ids = list(dict.fromkeys(user_ids))
        if not ids or limit <= 0:
            return {u: [] for u in ids}
        pipe = self.redis.pipeline(transaction=False)
        for u in ids:
            pipe.execute_command(*self._latest_cmd(timeline_key(u), limit))
        replies = await pipe.execute()
        return {u: self._latest_rows(r, limit) or [] for u, r in zip(ids, replies, strict=True)}

    async def latest_or_none(self, user_id: int, limit: int) -> list[Entry] | None:
        """Like `latest` in one round trip, but None when the timeline is missing (rebuild)."""
        return await self._latest(timeline_key(user_id), limit)

    async def before(self, user_id: int, score_ms: int, post_id: int, limit: int) -> list[Entry]:
        """Keyset page: entries strictly older than (score_ms, post_id), newest first.

        Order is (score desc, post id desc). The score bound is inclusive with an id
        tie-break, so posts sharing a millisecond are neither lost nor repeated.
        """
        return await self._before(timeline_key(user_id), score_ms, post_id, limit)

    # -- author indexes -------------------------------------------------------------------

    async def push_author_post(self, author_id: int, post_id: int, score_ms: int) -> int:
        """Add a post to `posts:{author}`: one write whatever the follower count (pull mode)."""
        args = [
            *_check_entry(post_id, score_ms),
            self.author_posts_max,
            0,
            EMPTY_MEMBER,
        ]
        return int(await self._eval(PUSH_MANY, [author_posts_key(author_id)], args))

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
        return await self._latest(author_posts_key(author_id), limit) or []

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
        pipe = self.redis.pipeline(transaction=False)
        for a in ids:
            pipe.execute_command(*self._latest_cmd(author_posts_key(a), limit))
        replies = await pipe.execute()
        return {a: self._latest_rows(r, limit) for a, r in zip(ids, replies, strict=True)}

    async def remove_author_post(self, author_id: int, post_id: int) -> int:
        """Drop a post from its author's index (delete); an emptied index stays known-empty."""
        return await self._remove([author_posts_key(author_id)], [post_id])

    # -- shared implementations -----------------------------------------------------------

    async def _push_entries(
        self, key: str, max_entries: int, entries: Sequence[Entry], create: bool
    ) -> int:
        if not entries:
            return 0
        args = [max_entries, 1 if create else 0, EMPTY_MEMBER, *_flat_entries(entries)]
        return int(await self._eval(PUSH_ENTRIES, [key], args))

    async def _rebuild(
        self, key: str, max_entries: int, entries: Sequence[Entry], keep_since_ms: int | None
    ) -> int:
        # Only the newest max_entries can survive the trim: do not ship the rest.
        newest = sorted(entries, key=lambda e: (e[1], e[0]), reverse=True)[:max_entries]
        keep = "" if keep_since_ms is None else _check_score(keep_since_ms)
        args = [max_entries, keep, EMPTY_MEMBER, *_flat_entries(newest)]
        return int(await self._eval(REBUILD, [key], args))

    async def _remove(self, keys: Sequence[str], post_ids: Sequence[int]) -> int:
        members = [encode_post_id(p) for p in dict.fromkeys(post_ids)]
        if not members or not keys:
            return 0
        total = 0
        for chunk in _chunks(members, 1000):
            results = await self._eval_batches(REMOVE, self._batches(keys), [EMPTY_MEMBER, *chunk])
            total += sum(int(r) for r in results)
        return total

    @staticmethod
    def _latest_cmd(key: str, limit: int) -> tuple[Any, ...]:
        # -inf includes the EMPTY marker, which tells "known empty" from "missing" in one call;
        # limit + 1 so the marker never costs a real row.
        return ("ZRANGE", key, "+inf", "-inf", "BYSCORE", "REV", "LIMIT", 0, limit + 1)

    @staticmethod
    def _latest_rows(reply: Any, limit: int) -> list[Entry] | None:
        rows = _parse_members(reply)
        if not rows:
            return None
        return [r for r in rows if r[1] > 0][:limit]

    async def _latest(self, key: str, limit: int) -> list[Entry] | None:
        if limit <= 0:
            return [] if await self.redis.exists(key) else None
        reply = await self.redis.execute_command(*self._latest_cmd(key, limit))
        return self._latest_rows(reply, limit)

    async def _before(self, key: str, score_ms: int, post_id: int, limit: int) -> list[Entry]:
        if limit <= 0:
            return []
        score = _check_score(score_ms)
        # One round trip, two ranges: the cursor's own millisecond (inclusive bound; its ids at
        # or above the cursor were served already) and everything strictly older. A long run
        # of equal scores costs rows, never correctness; no Lua, so no per-call script cost.
        pipe = self.redis.pipeline(transaction=False)
        pipe.execute_command("ZRANGE", key, score, score, "BYSCORE", "REV")
        pipe.execute_command("ZRANGE", key, f"({score}", "(0", "BYSCORE", "REV", "LIMIT", 0, limit)
        same, older = await pipe.execute()
        rows = [e for e in _parse_members(same) if e[0] < post_id]
        return (rows + _parse_members(older))[:limit]
