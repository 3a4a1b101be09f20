"""Post id layout: (ms since 2015-01-01) << 22 | sequence, made by next_post_id() in SQL
(migrations/versions/0001_initial_schema.py; with several regions the sequence field's low 4
bits are the home region's number, migration 0017, decision 0087). The one home of the layout
in Python: timelines, ranking and the read path derive creation times and Redis members from
here.

Every id after mid-2022 has 19 decimal digits, so ids compare the same as integers and as
fixed-width strings, and the creation millisecond can be read back without a lookup.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.errors import BadInput

EPOCH_MS = 1_420_070_400_000  # 2015-01-01T00:00:00Z
SEQUENCE_BITS = 22
ID_DIGITS = 19
MAX_POST_ID = 10**ID_DIGITS - 1
MAX_STORED_ID = 2**63 - 1  # posts.id is a BIGINT


def created_ms(post_id: int) -> int:
    """The creation millisecond an id carries."""
    return (post_id >> SEQUENCE_BITS) + EPOCH_MS


def encode_post_id(post_id: int) -> str:
    """Fixed-width decimal text: ids of one millisecond then sort as strings too (the
    timelines' zset members)."""
    if not 0 < post_id <= MAX_POST_ID:
        raise ValueError(f"post id out of range: {post_id}")
    return f"{post_id:0{ID_DIGITS}d}"


def parse_post_id(raw: str) -> int | None:
    """A post id from a client, or None when it cannot be one (treated as not found).

    ASCII digits only (`"²".isdigit()` is true, `int("²")` fails) and within a signed 64-bit
    column (19 digits go up to 10**19 - 1, past BIGINT's 2**63 - 1)."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > ID_DIGITS:
        return None
    value = int(raw)
    return value if 0 < value <= MAX_STORED_ID else None


def parse_reported_ids(raw: Sequence[str], limit: int) -> list[int]:
    """The post ids a client reports (reportImpressions, reportEngagement); BAD_USER_INPUT
    for more than `limit` or a malformed one."""
    if len(raw) > limit:
        raise BadInput(f"Report at most {limit} post ids at once.")
    ids = [parse_post_id(str(value)) for value in raw]
    if any(post_id is None for post_id in ids):
        raise BadInput("postIds must be post ids (19-digit strings).")
    return [post_id for post_id in ids if post_id is not None]
