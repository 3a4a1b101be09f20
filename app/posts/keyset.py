"""Opaque keyset cursors for plain post lists: (created_at, post id), base64url text.

They carry a position, not a permission: every page re-applies visibility, so a forged
cursor can only move within what the viewer may already see. Every list cursor (`posts`,
`followers`, `following`, `comments`) is decoded here, so the one range rule holds for all:
the date, converted to UTC, lies in the years 1-9999. The driver sends dates in UTC, and a
date past either end once converted (0001-01-01T00:00+14:00) overflows Python's datetime;
refused here it is a malformed cursor (BAD_USER_INPUT), never a failed statement.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime

from app.errors import BadInput

_PREFIX = "k1:"


def encode(created_at: datetime, post_id: int) -> str:
    raw = f"{_PREFIX}{created_at.isoformat()}|{post_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str) -> tuple[datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not raw.startswith(_PREFIX):
            raise ValueError(raw)
        stamp, _, post_id = raw[len(_PREFIX) :].partition("|")
        when = datetime.fromisoformat(stamp)
        if when.tzinfo is None:
            raise ValueError(stamp)
        return when.astimezone(UTC), int(post_id)  # OverflowError: outside years 1-9999
    except (ValueError, OverflowError, UnicodeDecodeError, binascii.Error) as exc:
        raise BadInput("The 'after' cursor is not valid; use an endCursor from a page.") from exc
