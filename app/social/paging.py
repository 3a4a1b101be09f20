"""What the batched pages of app.social share: a keyset position and its SQL form."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, bindparam, tuple_
from sqlalchemy.sql.elements import Tuple

Position = tuple[datetime, int]  # keyset (created_at, id), as app.posts.keyset decodes it


def bound(position: Position) -> Tuple:
    """A keyset position as typed parameters: ids are bigints (an untyped Python int is
    sent as an int4 and fails past 2**31)."""
    at, row_id = position
    return tuple_(
        bindparam(None, at, type_=DateTime(timezone=True)),
        bindparam(None, row_id, type_=BigInteger),
    )
