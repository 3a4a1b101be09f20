"""The packed timeline layout on the Python side: bytes <-> ids, newest first.

A packed timeline (`tl:{<user>}`, `posts:{<author>}`) is a Redis string: one format byte
(`\\x01`) then post ids as 8-byte big-endian integers, strictly ascending (oldest first).
Ids are time-ordered (`app.posts.ids`), so the order by (created ms, id) the API promises is
the byte order, and an id's creation ms is read from the id itself. Reads take the tail of
the string with GETRANGE: the newest `n` entries are its last `8 n` bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from app.posts.ids import EPOCH_MS, SEQUENCE_BITS
from app.timelines import constants
from app.timelines.scripts import FORMAT_BYTE

ENTRY_BYTES = 8
_MS_SPAN = 1 << SEQUENCE_BITS  # ids per millisecond


def pack_ids(ids: Iterable[int]) -> bytes:
    """Ids as ascending, duplicate-free packed entries (no format byte)."""
    ordered = sorted(set(ids))
    return struct.pack(f">{len(ordered)}q", *ordered)


def entries_of(raw: bytes) -> bytes:
    """The entry bytes of a GETRANGE/GET reply: the format byte stripped when present."""
    extra = len(raw) % ENTRY_BYTES
    if extra == 0:
        return raw
    if extra != 1 or raw[:1] != FORMAT_BYTE:
        raise ValueError(f"not a packed timeline ({len(raw)} bytes, starts {raw[:1]!r})")
    return raw[1:]


def newest_first(body: bytes, start: int = 0, stop: int | None = None) -> list[tuple[int, int]]:
    """Entries `start:stop` (ascending positions) of entry bytes as (post_id, created_ms),
    newest first."""
    stop = len(body) // ENTRY_BYTES if stop is None else stop
    if stop <= start:
        return []
    ids = struct.unpack_from(f">{stop - start}q", body, start * ENTRY_BYTES)
    return [(p, (p >> SEQUENCE_BITS) + EPOCH_MS) for p in reversed(ids)]


def count_below(body: bytes, bound: int) -> int:
    """How many entries of ascending entry bytes are < bound (binary search, no full parse)."""
    lo, hi = 0, len(body) // ENTRY_BYTES
    unpack = struct.Struct(">q").unpack_from
    while lo < hi:
        mid = (lo + hi) // 2
        if unpack(body, mid * ENTRY_BYTES)[0] < bound:
            lo = mid + 1
        else:
            hi = mid
    return lo


def keyset_bound(score_ms: int, post_id: int) -> int:
    """The id below which entries are strictly older than the cursor (score_ms, post_id) in
    (created ms, id) order: ids of earlier milliseconds, and ids of `score_ms` below
    `post_id` (an id from another millisecond than its score is clamped into it)."""
    first = (score_ms - EPOCH_MS) << SEQUENCE_BITS
    return min(max(post_id, first), first + _MS_SPAN)


def entry_count(strlen: int) -> int:
    """Entries in a packed string of this length (0 for a missing key)."""
    return max(0, strlen - 1) // ENTRY_BYTES


def _jemalloc_class(size: int) -> int:
    """The jemalloc size class a request of `size` bytes gets (4 classes per doubling)."""
    if size <= 128:
        return -(-size // 16) * 16
    step = 1 << ((size - 1).bit_length() - 3)
    return -(-size // step) * step


def default_trim_slack(max_entries: int, limit: int = constants.TRIM_SLACK_MAX) -> int:
    """Entries a packed timeline may take past its bound before the amortized trim rewrites
    it: as many as fit in the allocation a freshly trimmed string already has (Redis's
    jemalloc rounds it up to a size class), so appends never reallocate, between 1 and
    `limit`. 800 entries: 6,407 bytes with the sds header, a 7,168-byte class: 64 (95 fit)."""
    used = 1 + ENTRY_BYTES * max_entries
    used += (3 if used < 256 else 5 if used < 65536 else 9) + 1  # sds header + NUL
    room = (_jemalloc_class(used) - used) // ENTRY_BYTES
    return max(1, min(limit, room))
