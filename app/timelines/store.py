"""The one owner of the Redis timeline keyspace (docs/redis-keys.md).

- `tl:{<user_id>}`: home timeline, newest `timeline_max` post ids.
- `posts:{<author_id>}`: recent posts of an author, same layout, newest `author_posts_max`.

One layout (docs/decisions/0001-timeline-encoding.md): a string, a format byte then 8-byte
big-endian ids in ascending order (`app.timelines.packed`); ~9 B per entry, an insert is one
GETRANGE + one APPEND. The zset layout of earlier releases is retired (decision 0034): only
the one-way conversion (`app.timelines.convert`, `python -m app.timelines convert`) reads
it; here a key of any other type than a string is no timeline: reads take it for missing (its
owner's next read rebuilds it), writes delete or replace it (`app.timelines.scripts`).

Braces are literal Redis Cluster hash tags. No other module builds these key strings or runs
commands on them.

Invariants kept by every method here:
- a timeline is its newest `timeline_max` entries in (created ms, id) order, which is id
  order: ids are time-ordered, and a score given with an id must equal the id's own
  millisecond (`created_at_ms(id)`, checked on write), so the layout stores no score;
- bounded: a string may carry up to `trim_slack` older entries in front of the newest
  `timeline_max` (the amortized trim drops them), which no read returns and no rewrite keeps;
- a missing key means "unknown, rebuild from Postgres"; a known-but-empty key holds only the
  format byte, which readers never return;
- fan-out writes only into timelines that exist (by default): writing one post into a missing
  key would create a partial timeline that looks complete;
- replays change nothing visible: an id already in the timeline is not added again.
"""

from __future__ import annotations

import asyncio
import functools
import struct
import time
from binascii import crc_hqx
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from redis.asyncio.cluster import ClusterNode, PipelineCommand, RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    ClusterDownError,
    NoScriptError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.posts.ids import EPOCH_MS
from app.posts.ids import created_ms as created_at_ms
from app.redis_scripts import AnyRedis, LuaScript, run_script, run_script_many
from app.timelines import constants, packed
from app.timelines.scripts import (
    PUSH_ENTRIES,
    PUSH_MANY,
    PUSH_MANY_NODE,
    PUSH_POSTS,
    REBUILD,
    REMOVE,
)
from app.timelines.tails import Tail, fused_call, fused_node_script

T = TypeVar("T")

# The id layout lives in app.posts.ids; its epoch stays importable from here under this name
# (tests and benchmarks build ids with it), as does `created_at_ms`.
POST_ID_EPOCH_MS = EPOCH_MS
_MAX_EXACT_SCORE = 2**53

# SCAN patterns of the two families (`python -m app.timelines convert` walks them).
TIMELINE_PATTERN = "tl:{*}"
AUTHOR_POSTS_PATTERN = "posts:{*}"

Entry = tuple[int, int]
"""(post_id, created_at_ms)."""

_EMPTY = object()  # `_latest_reply` of an existing timeline asked for 0 entries


def timeline_key(user_id: int) -> str:
    """`tl:{<user_id>}`: the hash tag keeps all of one user's keys in one cluster slot."""
    return f"tl:{{{int(user_id)}}}"


# Where the user id sits in a timeline key, as Lua's string.sub(key, from, to) takes it
# (the live counts' tail reads the recipients' ids from their keys, `app.timelines.tails`).
TIMELINE_ID_SPAN = (5, -2)

# `timeline_key` as bytes, for the fan-out's 1,000-key script calls: redis-py encodes every
# str argument in Python, and building plus packing 1,000 str keys cost twice as much client
# CPU as bytes ones (the worker's largest cost per batch).
_TIMELINE_KEY_BYTES = b"tl:{%d}"


def timeline_keys(user_ids: Iterable[int]) -> list[bytes]:
    """`timeline_key` of many users, as bytes."""
    return [_TIMELINE_KEY_BYTES % int(u) for u in user_ids]


# `tlw:{<tag>}`: the durability mark `confirm_replicated` writes before its WAIT, one per
# hash slot; <tag> is the smallest number whose key hashes to that slot (`_slot_tags`).
_SLOTS = 16384


@functools.cache
def _slot_tags() -> tuple[int, ...]:
    """For each hash slot, the smallest n such that `tlw:{n}` hashes to it (~110,000
    candidates, ~60 ms once per process): a mark key on any node a batch wrote to."""
    tags = [-1] * _SLOTS
    left, n = _SLOTS, 0
    while left:
        slot = crc_hqx(b"%d" % n, 0) % _SLOTS  # a hash tag's slot is its content's
        if tags[slot] < 0:
            tags[slot] = n
            left -= 1
        n += 1
    return tuple(tags)


def durability_mark_key(slot: int) -> str:
    """`tlw:{<tag>}`: the durability mark of hash slot `slot` (docs/redis-keys.md)."""
    return f"tlw:{{{_slot_tags()[slot]}}}"


class NotReplicated(RedisError):
    """A master acknowledged fewer replicas than asked for a batch's writes within the
    timeout (`TimelineStore.confirm_replicated`): the caller fails, and its job is retried."""


def author_posts_key(author_id: int) -> str:
    """`posts:{<author_id>}`: one author's recent posts."""
    return f"posts:{{{int(author_id)}}}"


def _check_score(score_ms: int) -> int:
    """Scores (cursors, keep-since bounds) must be positive exact integers."""
    score = int(score_ms)
    if not 0 < score < _MAX_EXACT_SCORE:
        raise ValueError(f"score out of range: {score_ms}")
    return score


def _checked_ids(entries: Iterable[Entry]) -> list[int]:
    """The ids of (post_id, score) entries; each score must be its id's own creation
    millisecond. The layout stores ids only and reads derive the score from the id, so a
    caller whose score disagrees would see another order or cursor than it meant: refuse it.
    """
    ids = []
    for post_id, score_ms in entries:
        if _check_score(score_ms) != created_at_ms(post_id):
            raise ValueError(
                f"score {score_ms} is not the creation ms of post {post_id} "
                f"({created_at_ms(post_id)})"
            )
        ids.append(int(post_id))
    return ids


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _rerouted(exc: BaseException) -> bool:
    """A node's call that failed because the cluster changed under it (a master gone or
    demoted, slots moving): worth sending again once the slots are mapped anew."""
    return isinstance(
        exc,
        RedisConnectionError | RedisTimeoutError | ReadOnlyError | ClusterDownError | TryAgainError,
    )


async def _mark_and_wait(
    node: ClusterNode, slot: int, stamp: int, replicas: int, timeout_ms: int
) -> Any:
    """The slot's durability mark SET, then WAIT, on one connection of `node`, sent once:
    any error (the node gone, demoted: MOVED) fails the batch, whose retry writes again (its
    rerouted writes map the cluster afresh) and waits again. Not through redis-py's cluster
    pipeline: after a connection error it sends again only the commands not answered, and a
    WAIT routed anew (it has no key) goes to every master, on connections that wrote nothing,
    which answer at once, and redis-py sums their replicas: a master killed during a batch's
    WAIT left the batch confirmed and its entries gone (decision 0068, stop 46)."""
    commands = [
        PipelineCommand(0, "SET", durability_mark_key(slot), stamp),
        PipelineCommand(1, "WAIT", replicas, timeout_ms),
    ]
    await node.execute_pipeline(commands)
    for command in commands:
        if isinstance(command.result, BaseException):
            raise command.result
    return commands[1].result


def _wrong_type(reply: Any) -> bool:
    """A key that is not a string (redis-py prefixes pipeline errors with the command)."""
    return isinstance(reply, ResponseError) and "WRONGTYPE" in str(reply)


def _ids(reply: Any, limit: int) -> list[int] | None:
    """`_rows` without the scores: post ids newest first, one C unpack (the read path's
    candidates need the ids only; building 625 (id, ms) tuples per first page cost more than
    the GETRANGE itself)."""
    if not reply or _wrong_type(reply):
        return None
    body = packed.entries_of(reply)
    n = min(limit, len(body) // packed.ENTRY_BYTES)
    if n <= 0:
        return []
    found = list(struct.unpack_from(f">{n}q", body, len(body) - packed.ENTRY_BYTES * n))
    found.reverse()
    return found


def _rows(reply: Any, limit: int) -> list[Entry] | None:
    """A GETRANGE reply of the newest entries as rows, newest first; None for a missing key
    or one that is not a string (no timeline: rebuilt by its owner's next read)."""
    if not reply or _wrong_type(reply):
        return None
    return packed.newest_first(packed.entries_of(reply))[:limit]


@dataclass(frozen=True)
class RawTimeline:
    """What `inspect` found under one key (operators' view, `python -m app.timelines`)."""

    key: str
    layout: str  # "packed", "none", or the Redis type of a key that is no timeline ("zset")
    entries: list[Entry]  # visible entries, newest first
    hidden: int  # older entries past the bound, dropped at the next trim
    memory_bytes: int | None


class TimelineStore:
    """Bounded home timelines and author indexes in Redis (standalone or cluster).

    Batches of keys go to Redis as one EVALSHA per `script_batch` keys on a standalone server.
    On a cluster the fan-out's insert (`push_to_timelines`, `push_with_tails`) is one call per
    node, the nodes in parallel (decision 0089: keys in ARGV, `allow-cross-slot-keys`); the
    other multi-key scripts group keys by slot, the per-slot calls pipelined (one round trip
    per node). The client must return bytes (`decode_responses=False`, as `app.redis_client`
    builds it).
    """

    def __init__(
        self,
        redis: AnyRedis,
        timeline_max: int,
        author_posts_max: int,
        *,
        script_batch: int = constants.SCRIPT_BATCH,
        trim_slack: int | None = None,
    ) -> None:
        if timeline_max <= 0 or author_posts_max <= 0 or script_batch <= 0:
            raise ValueError("timeline_max, author_posts_max and script_batch must be positive")
        if trim_slack is not None and trim_slack <= 0:
            raise ValueError("trim_slack must be positive")
        self.redis = redis
        self.timeline_max = timeline_max
        self.author_posts_max = author_posts_max
        self.script_batch = script_batch
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
        added); the timeline keeps its newest `timeline_max`.
        """
        if not user_ids:
            return 0
        keys = timeline_keys(user_ids)
        args = self._push_args(
            post_id, score_ms, self.timeline_max, self.timeline_slack, only_existing
        )
        if self._cluster:
            return await self._push_on_nodes(keys, args)
        results = await self._eval_batches(PUSH_MANY, self._batches(keys), args)
        return sum(int(r) for r in results)

    async def push_posts_to_timelines(
        self,
        entries: Sequence[Entry],
        user_ids: Sequence[int],
        *,
        only_existing: bool = True,
    ) -> int:
        """Fan several posts into many timelines: what `push_to_timelines` once per post does,
        in one script call per batch (PUSH_POSTS). Why: a timeline newer than none of the
        posts takes them all in one append, one read and one write for the lot instead of
        per post. Returns the sum over the posts of the timelines that gained each."""
        ids = sorted(set(_checked_ids(entries)))
        if not ids or not user_ids:
            return 0
        if len(ids) == 1:
            return await self.push_to_timelines(
                ids[0], created_at_ms(ids[0]), user_ids, only_existing=only_existing
            )
        args = self._push_args(
            ids[0], created_at_ms(ids[0]), self.timeline_max, self.timeline_slack, only_existing
        )
        args[0] = packed.pack_ids(ids)
        keys = timeline_keys(user_ids)
        results = await self._eval_batches(PUSH_POSTS, self._batches(keys), args)
        return sum(int(r) for r in results)

    def runs_tails_with(self, redis: AnyRedis) -> bool:
        """Can a tail reading keys of `redis` ride in `push_with_tails`? On the store's own
        server or cluster (on a cluster, only tails that can be cut by node: `Tail.split`)."""
        return self.redis is redis

    async def push_with_tails(
        self, post_id: int, score_ms: int, user_ids: Sequence[int], tails: Sequence[Tail]
    ) -> int:
        """`push_to_timelines` of one post into existing timelines, then each tail
        (`app.timelines.tails`), in one script call (decision 0070); each tail's answer is
        left in its `reply`. One call whatever the number of users (the caller pages them);
        on a cluster one call per node (`_push_with_tails_on_nodes`). Returns how many
        timelines gained it."""
        push = self._push_args(post_id, score_ms, self.timeline_max, self.timeline_slack, True)
        if self._cluster:
            return await self._push_with_tails_on_nodes(user_ids, push, tails)
        script, keys, args = fused_call(timeline_keys(user_ids), push, tails)
        reply = await run_script(self.redis, script, keys, args)
        for tail, answer in zip(tails, reply[1:], strict=True):
            tail.reply = answer
        return int(reply[0])

    # -- the fan-out's insert on a cluster: one call per node (decision 0089) ------------

    def _node_groups(self, keys: Sequence[bytes]) -> dict[str, tuple[ClusterNode, list[int]]]:
        """The positions of `keys`, grouped by the master serving each key's slot as the
        client last mapped the cluster (in order within a group)."""
        assert isinstance(self.redis, RedisCluster)
        manager = self.redis.nodes_manager
        groups: dict[str, tuple[ClusterNode, list[int]]] = {}
        for i, key in enumerate(keys):
            node = manager.get_node_from_slot(key_slot(key))
            group = groups.get(node.name)
            if group is None:
                groups[node.name] = group = (node, [])
            group[1].append(i)
        return groups

    async def _mapped(self) -> None:
        """The client knows the cluster's slots (it maps them at first use, and again after
        it lost a node; otherwise this returns at once)."""
        assert isinstance(self.redis, RedisCluster)
        await self.redis.initialize()

    async def _node_eval(
        self, node: ClusterNode, script: LuaScript, keys: Sequence[Any], args: Sequence[Any]
    ) -> Any:
        """One EVALSHA of a per-node script on `node`: no declared key, `keys` first in ARGV
        (`app.timelines.scripts.NODE_PRELUDE`). On NOSCRIPT the node loads it, once."""
        command = ("EVALSHA", script.sha, 0, len(keys), *keys, *args)
        try:
            return await self.redis.execute_command(*command, target_nodes=node)
        except NoScriptError:
            await self.redis.execute_command("SCRIPT", "LOAD", script.source, target_nodes=node)
            return await self.redis.execute_command(*command, target_nodes=node)

    async def _push_on_nodes(self, keys: Sequence[bytes], args: Sequence[Any]) -> int:
        """`push_to_timelines` on a cluster: one PUSH_MANY_NODE call per master (at most
        `script_batch` keys each), all at once. Keys a node no longer serves come back
        unwritten (a slot moved or mid-migration), and a call that failed because the
        cluster changed under it (its master gone or demoted) wrote nothing certain: those
        keys go again one slot per call through redis-py's pipeline, which follows MOVED and
        ASK and maps the cluster anew as it does for every command (remapping here, under
        other pages' calls in flight, would close their connections)."""
        await self._mapped()
        groups = self._node_groups(keys)
        calls = [
            (node, part)
            for node, positions in groups.values()
            for part in _chunks(positions, self.script_batch)
        ]
        replies = await asyncio.gather(
            *(self._node_eval(node, PUSH_MANY_NODE, [keys[i] for i in at], args)
              for node, at in calls),
            return_exceptions=True,
        )  # fmt: skip
        gained = 0
        again: list[int] = []
        for (_, at), reply in zip(calls, replies, strict=True):
            if isinstance(reply, BaseException):
                if not _rerouted(reply):
                    raise reply
                again += at
                continue
            gained += int(reply[0])
            again += [at[int(j) - 1] for j in reply[1]]
        if not again:
            return gained
        moving = [keys[i] for i in sorted(again)]
        results = await self._eval_batches(PUSH_MANY, self._batches(moving), args)
        return gained + sum(int(r) for r in results)

    async def _push_with_tails_on_nodes(
        self, user_ids: Sequence[int], push: Sequence[Any], tails: Sequence[Tail]
    ) -> int:
        """`push_with_tails` on a cluster: one fused call per master over the timelines it
        serves, each with its part of every tail (`Tail.split`); the node of a tail's
        `last_key` after all the others (the counts' online check must follow every insert
        of the page). Timelines a node no longer serves come back unwritten, and a call
        whose master was lost or demoted wrote nothing certain (the last one: nor checked
        anyone): written afterwards by `_push_on_nodes` (without the tails, idempotently)
        and handed to the tails' `merge`, whose caller counts them the old way. Any other
        failure fails the call (the job's retry repeats it, idempotently)."""
        splits = [t.split for t in tails]
        if any(split is None for split in splits):
            raise ValueError("a tail without a split cannot ride on a cluster")
        await self._mapped()
        keys = timeline_keys(user_ids)
        groups = self._node_groups(keys)
        assert isinstance(self.redis, RedisCluster)
        last_keys = [s.last_key for s in splits if s is not None and s.last_key is not None]
        last: ClusterNode | None = None
        if last_keys:
            last = self.redis.nodes_manager.get_node_from_slot(self.redis.keyslot(last_keys[0]))
            groups.setdefault(last.name, (last, []))
        parts: list[list[tuple[Sequence[int], Tail]]] = [[] for _ in tails]
        redo: list[int] = []
        gained = 0

        async def call(node: ClusterNode, at: list[int], is_last: bool) -> int:
            mine = [s.part(at, is_last) for s in splits if s is not None]
            _, call_keys, args = fused_call([keys[i] for i in at], push, mine)
            try:
                reply = await self._node_eval(
                    node, fused_node_script(tuple(t.program for t in mine)), call_keys, args
                )
            except Exception as exc:
                if not _rerouted(exc):
                    raise
                # Its master gone or demoted: its timelines again without the tails, and,
                # for the last node, every user of the page, whose check did not run.
                redo.extend(range(len(keys)) if is_last else at)
                return 0
            for i, (tail, answer) in enumerate(zip(mine, reply[1:-1], strict=True)):
                tail.reply = answer
                parts[i].append((at, tail))
            redo.extend(at[int(j) - 1] for j in reply[-1])
            return int(reply[0])

        first = [
            call(node, at, False) for name, (node, at) in groups.items()
            if last is None or name != last.name
        ]  # fmt: skip
        for written in await asyncio.gather(*first):
            gained += written
        if last is not None:
            gained += await call(last, groups[last.name][1], True)
        if redo:
            redo[:] = sorted(set(redo))
            gained += await self._push_on_nodes([keys[i] for i in redo], push)
        for tail, split, answered in zip(tails, splits, parts, strict=True):
            assert split is not None
            tail.reply = split.merge(answered, redo)
        return gained

    @staticmethod
    def _push_args(
        post_id: int, score_ms: int, max_entries: int, slack: int, only_existing: bool
    ) -> list[Any]:
        """PUSH_MANY's arguments."""
        _checked_ids([(post_id, score_ms)])
        probe = str(-packed.ENTRY_BYTES * min(constants.PROBE_ENTRIES, max_entries))
        return [packed.pack_ids([post_id]), max_entries, 1 if only_existing else 0, slack, probe]

    async def confirm_replicated(
        self, user_ids: Sequence[int], replicas: int, timeout_ms: int
    ) -> None:
        """Block until `replicas` replicas of every master holding one of these users'
        timelines have everything that master was written before this call (WAIT), or raise
        NotReplicated naming the first master that fell short within `timeout_ms`.

        Why a mark first: WAIT waits for the replication offset of its own connection's last
        write, and a connection that wrote nothing (another one of the pool did the batch's
        writes; a retried batch whose entries are already there writes nothing) gets an
        answer at once, whatever the replica lacks. So each master gets, on one connection,
        a SET of its slot's durability mark (`tlw:{<tag>}`) then the WAIT: the offset waited
        for is past every earlier write of that master, the batch's, an earlier try's, and
        any other job's. One pipelined round trip per master (cluster) or one (plain server).
        """
        if replicas <= 0 or not user_ids:
            return
        stamp = int(time.time() * 1000)
        keys = timeline_keys(user_ids)
        if not self._cluster:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.execute_command("SET", durability_mark_key(key_slot(keys[0])), stamp)
                pipe.execute_command("WAIT", replicas, timeout_ms)
                replies = await pipe.execute()
            self._check_acks([("server", replies[1])], replicas, timeout_ms)
            return
        cluster = self.redis
        assert isinstance(cluster, RedisCluster)
        nodes: dict[str, tuple[ClusterNode, int]] = {}
        for slot in {key_slot(k) for k in keys}:
            node = cluster.nodes_manager.get_node_from_slot(slot)
            nodes.setdefault(node.name, (node, slot))
        acks = await asyncio.gather(
            *(_mark_and_wait(node, slot, stamp, replicas, timeout_ms)
              for node, slot in nodes.values())
        )  # fmt: skip
        self._check_acks(list(zip(nodes, acks, strict=True)), replicas, timeout_ms)

    @staticmethod
    def _check_acks(acks: Sequence[tuple[str, Any]], replicas: int, timeout_ms: int) -> None:
        for node, acked in acks:
            if int(acked) < replicas:
                raise NotReplicated(
                    f"{node}: {int(acked)} of {replicas} replicas acknowledged the batch's "
                    f"timeline writes within {timeout_ms} ms"
                )

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

        An empty rebuild leaves the format byte alone so `exists` is true and the user is not
        rebuilt on every read. `keep_since_ms`: keep entries already present with a score at
        or above it (fan-out writes that raced with the Postgres read that produced
        `entries`). Returns the number of entries kept.
        """
        return await self._rebuild(timeline_key(user_id), self.timeline_max, entries, keep_since_ms)

    async def remove_posts(self, user_id: int, post_ids: Sequence[int]) -> int:
        """Remove posts from one timeline (unfollow/block cleanup); never creates the key."""
        return await self.remove_posts_from_many(post_ids, [user_id])

    async def remove_posts_from_many(self, post_ids: Sequence[int], user_ids: Sequence[int]) -> int:
        """Remove posts from many timelines in batched script calls; returns entries removed.

        A timeline emptied this way stays known-empty (it is still complete).
        """
        keys = [timeline_key(u) for u in user_ids]
        return await self._remove(keys, self.timeline_max, post_ids)

    async def delete(self, user_id: int) -> None:
        """Forget a timeline (it is rebuilt from Postgres on the next read)."""
        await self.redis.delete(timeline_key(user_id))

    # -- home timelines: reads ------------------------------------------------------------

    async def exists(self, user_id: int) -> bool:
        """True when the timeline is materialized (possibly known-empty)."""
        return await self._is_timeline(timeline_key(user_id))

    async def count(self, user_id: int) -> int:
        """Real entries in a timeline (the format byte is not counted)."""
        try:
            strlen = await self.redis.strlen(timeline_key(user_id))
        except ResponseError as exc:
            if not _wrong_type(exc):
                raise
            return 0
        return min(packed.entry_count(int(strlen)), self.timeline_max)

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

    def latest_ids_command(self, user_id: int, limit: int) -> tuple[Any, ...]:
        """The command `latest_ids_or_none` sends (limit > 0), for a caller that pipelines it
        with other reads of the same user's slot; `latest_ids_reply` reads its reply."""
        if limit <= 0:
            raise ValueError("limit must be positive")
        return self._latest_cmd(timeline_key(user_id), self.timeline_max, limit)

    @staticmethod
    def latest_ids_reply(reply: Any, limit: int) -> list[int] | None:
        """`latest_ids_or_none`'s answer from the reply of `latest_ids_command` (a pipeline's
        reply, errors left in place: WRONGTYPE is no timeline, others are raised)."""
        if isinstance(reply, Exception) and not _wrong_type(reply):
            raise reply
        return _ids(reply, limit)

    async def latest_ids_or_none(self, user_id: int, limit: int) -> list[int] | None:
        """`latest_or_none`'s post ids only (newest first), without the (id, ms) rows."""
        reply = await self._latest_reply(timeline_key(user_id), self.timeline_max, limit)
        return [] if reply is _EMPTY else _ids(reply, limit)

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
        return int(await self._eval(PUSH_MANY, [author_posts_key(author_id)], args))

    async def rebuild_author(
        self, author_id: int, entries: Sequence[Entry], *, keep_since_ms: int | None = None
    ) -> int:
        """Atomically replace an author index (e.g. on a push->pull switch or after loss)."""
        key = author_posts_key(author_id)
        return await self._rebuild(key, self.author_posts_max, entries, keep_since_ms)

    async def author_exists(self, author_id: int) -> bool:
        return await self._is_timeline(author_posts_key(author_id))

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
        return await self._authors_latest(author_ids, limit, _rows)

    async def author_latest_ids_many_or_none(
        self, author_ids: Sequence[int], limit: int
    ) -> dict[int, list[int] | None]:
        """`author_latest_many_or_none`'s post ids only (newest first), one pipeline."""
        return await self._authors_latest(author_ids, limit, _ids)

    async def _authors_latest(
        self,
        author_ids: Sequence[int],
        limit: int,
        decode: Callable[[Any, int], list[T] | None],
    ) -> dict[int, list[T] | None]:
        """Each author's index read in one pipeline, its reply decoded by `decode`."""
        ids = list(dict.fromkeys(author_ids))
        if not ids:
            return {}
        if limit <= 0:
            return {a: [] for a in ids}
        keys = [author_posts_key(a) for a in ids]
        replies = await self._latest_replies(keys, self.author_posts_max, limit)
        return {a: decode(reply, limit) for a, reply in zip(ids, replies, strict=True)}

    async def remove_author_post(self, author_id: int, post_id: int) -> int:
        """Drop a post from its author's index (delete); an emptied index stays known-empty."""
        return await self._remove([author_posts_key(author_id)], self.author_posts_max, [post_id])

    # -- operators ------------------------------------------------------------------------

    async def inspect(self, key: str, max_entries: int) -> RawTimeline:
        """Everything one key holds (`python -m app.timelines show`); a key of another type
        (a zset not yet converted) is named by its type, without entries."""
        kind = cast(bytes, await self.redis.type(key)).decode()
        memory = await self.redis.memory_usage(key, samples=0) if kind != "none" else None
        if kind != "string":
            return RawTimeline(key, kind, [], 0, memory)
        body = packed.entries_of(cast(bytes, await self.redis.get(key) or b""))
        total = len(body) // packed.ENTRY_BYTES
        hidden = max(0, total - max_entries)
        return RawTimeline(key, "packed", packed.newest_first(body, hidden), hidden, memory)

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

    async def _is_timeline(self, key: str) -> bool:
        return bool(await self.redis.type(key) == b"string")

    async def _push_entries(
        self, key: str, max_entries: int, entries: Sequence[Entry], create: bool
    ) -> int:
        if not entries:
            return 0
        args = [max_entries, 1 if create else 0, packed.pack_ids(_checked_ids(entries))]
        return int(await self._eval(PUSH_ENTRIES, [key], args))

    async def _rebuild(
        self, key: str, max_entries: int, entries: Sequence[Entry], keep_since_ms: int | None
    ) -> int:
        keep = "" if keep_since_ms is None else _check_score(keep_since_ms)
        # Only the newest max_entries can survive the trim: do not ship the rest.
        ids = sorted(set(_checked_ids(entries)))[-max_entries:]
        args = [max_entries, keep, packed.pack_ids(ids)]
        return int(await self._eval(REBUILD, [key], args))

    async def _remove(self, keys: Sequence[str], max_entries: int, post_ids: Sequence[int]) -> int:
        ids = sorted(set(post_ids))
        if not ids or not keys:
            return 0
        total = 0
        for chunk in _chunks(ids, constants.REMOVE_IDS_PER_CALL):
            args = [max_entries, packed.pack_ids(chunk)]
            results = await self._eval_batches(REMOVE, self._batches(keys), args)
            total += sum(int(r) for r in results)
        return total

    # Reads: one GETRANGE per key. The last 8 n bytes are the newest n entries; a shorter
    # string comes back whole, format byte included (a lone format byte: known empty;
    # nothing: missing).

    @staticmethod
    def _latest_cmd(key: str, max_entries: int, limit: int) -> tuple[Any, ...]:
        return ("GETRANGE", key, -packed.ENTRY_BYTES * min(limit, max_entries), -1)

    async def _latest(self, key: str, max_entries: int, limit: int) -> list[Entry] | None:
        reply = await self._latest_reply(key, max_entries, limit)
        return [] if reply is _EMPTY else _rows(reply, limit)

    async def _latest_reply(self, key: str, max_entries: int, limit: int) -> Any:
        """The GETRANGE reply of the newest `limit` entries; None for no timeline (missing,
        or not a string), `_EMPTY` for an existing one when `limit` is 0."""
        if limit <= 0:
            return _EMPTY if await self._is_timeline(key) else None
        try:
            return await self.redis.execute_command(*self._latest_cmd(key, max_entries, limit))
        except ResponseError as exc:
            if not _wrong_type(exc):
                raise
            return None

    async def _latest_many(
        self, keys: Sequence[str], max_entries: int, limit: int
    ) -> list[list[Entry] | None]:
        replies = await self._latest_replies(keys, max_entries, limit)
        return [_rows(reply, limit) for reply in replies]

    async def _latest_replies(self, keys: Sequence[str], max_entries: int, limit: int) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.execute_command(*self._latest_cmd(key, max_entries, limit))
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        for reply in replies:
            if isinstance(reply, Exception) and not _wrong_type(reply):
                raise reply
        return replies

    async def _before(
        self, key: str, max_entries: int, score_ms: int, post_id: int, limit: int
    ) -> list[Entry]:
        # One GETRANGE of the visible entries (<= 6.4 KB for 800), a binary search for the
        # cursor's place and a parse of the page only. Entries are in (ms, id) order, so
        # "strictly older than (score, id)" is "below one id bound".
        if limit <= 0:
            return []
        score = _check_score(score_ms)
        try:
            reply = await self.redis.execute_command(
                "GETRANGE", key, -packed.ENTRY_BYTES * max_entries, -1
            )
        except ResponseError as exc:
            if not _wrong_type(exc):
                raise
            return []
        body = packed.entries_of(reply or b"")
        end = packed.count_below(body, packed.keyset_bound(score, post_id))
        return packed.newest_first(body, max(0, end - limit), end)
