"""Opaque keyset cursors for plain post lists: (created_at, post id), base64url text.

They carry a position, not a permission: every page re-applies visibility, so a forged
cursor can only move within what the viewer may already see.
"""

from __future__ import annotations

import base64
import binascii
from datetime import datetime

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
        return when, int(post_id)
    except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
        raise BadInput("The 'after' cursor is not valid; use an endCursor from a page.") from exc
