"""Post id layout: (ms since 2015-01-01) << 22 | sequence, made by next_post_id() in SQL.

Every id after mid-2022 has 19 decimal digits, so ids compare the same as integers and as
fixed-width strings, and the creation millisecond can be read back without a lookup.
"""

from __future__ import annotations

EPOCH_MS = 1_420_070_400_000
SEQUENCE_BITS = 22
ID_DIGITS = 19


def created_ms(post_id: int) -> int:
    return (post_id >> SEQUENCE_BITS) + EPOCH_MS


def parse_post_id(raw: str) -> int | None:
    """A post id from a client, or None when it cannot be one (treated as not found)."""
    if not raw.isdigit() or len(raw) > ID_DIGITS:
        return None
    return int(raw)
