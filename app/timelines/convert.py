"""The one-way conversion of zset timelines (the layout of releases before decision 0034)
into the packed layout: the only code that still reads a zset timeline.

A zset timeline (`tl:{<user>}` or `posts:{<author>}`) holds member = post id (19
fixed-width digits), score = its creation ms, and the EMPTY marker (member
"0000000000000000000", score 0) when known and empty. Converted, it holds the same ids, the
newest `max_entries` of them, packed (`app.timelines.packed`); the EMPTY marker alone becomes
a known-empty packed timeline.

`python -m app.timelines convert` runs it over every key (docs/operations.md, "Upgrading from
zset timelines"). Until a key is converted the service takes it for missing (its owner's next
read rebuilds it from PostgreSQL, replacing it), so converting is what spares those rebuilds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from app.posts.ids import ID_DIGITS
from app.redis_scripts import AnyRedis, run_script_many
from app.timelines import packed
from app.timelines.scripts import CONVERT

EMPTY_MEMBER = b"0" * ID_DIGITS  # a known-empty zset timeline's only member


def packed_entries(members: Sequence[bytes], max_entries: int) -> bytes:
    """A zset's members (ZRANGE 0 -1, ascending) as the entries of its packed form: the
    EMPTY marker left out, the newest `max_entries` kept."""
    ids = [int(m) for m in members if m != EMPTY_MEMBER]
    return packed.pack_ids(ids[-max_entries:] if max_entries > 0 else [])


async def convert_zsets(redis: AnyRedis, keys: Sequence[str], max_entries: int) -> int:
    """Rewrite the zsets among `keys` as packed timelines (atomic per key, idempotent);
    returns how many were converted. Missing keys stay missing; packed ones are left alone.

    The parsing happens here, not in Redis: one pipeline reads the zsets, then one script
    call per key swaps it if it still holds what was read (a key written in between is read
    again, up to 3 times, then left for the next run)."""
    done = 0
    pending = list(keys)
    for _ in range(3):
        if not pending:
            break
        kinds = await _pipeline(redis, [("TYPE", k) for k in pending])
        todo = [k for k, kind in zip(pending, kinds, strict=True) if _text(kind) == "zset"]
        if not todo:
            break
        replies = await _pipeline(redis, [("ZRANGE", k, 0, -1) for k in todo])
        calls: list[tuple[Sequence[Any], Sequence[Any]]] = []
        for key, members in zip(todo, replies, strict=True):
            if isinstance(members, Exception):
                continue  # changed type since TYPE: the next pass sees it
            digest = hashlib.sha1(b",".join(members)).hexdigest()
            calls.append(([key], [digest, packed_entries(members, max_entries)]))
        swapped = await run_script_many(redis, CONVERT, calls)
        done += sum(int(r) for r in swapped)
        pending = [c[0][0] for c, r in zip(calls, swapped, strict=True) if not int(r)]
    return done


async def count_zsets(redis: AnyRedis, keys: Sequence[str]) -> int:
    """How many of `keys` are zsets still (the dry run)."""
    kinds = await _pipeline(redis, [("TYPE", k) for k in keys])
    return sum(1 for kind in kinds if _text(kind) == "zset")


def _text(reply: Any) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


async def _pipeline(redis: AnyRedis, cmds: Sequence[tuple[Any, ...]]) -> list[Any]:
    pipe = redis.pipeline(transaction=False)
    for cmd in cmds:
        pipe.execute_command(*cmd)
    return list(await pipe.execute(raise_on_error=False))
