"""The SQL the hub needs: whom a subscriber follows in pull mode, their posts since the last
reset, and the final check that a pull-mode post may be announced to these users."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.types import BigInteger

from app.db.models import FANOUT_PULL
from app.posts.ids import created_ms

_NOT_BLOCKED = """
    NOT EXISTS (
        SELECT 1 FROM blocks b
        WHERE (b.blocker_id = f.follower_id AND b.blocked_id = f.followee_id)
           OR (b.blocker_id = f.followee_id AND b.blocked_id = f.follower_id)
    )
"""

_PULL_FOLLOWEES = text(
    f"""
    SELECT f.follower_id, f.followee_id FROM follows f JOIN users u ON u.id = f.followee_id
    WHERE f.follower_id = ANY(:users) AND u.fanout_mode = :pull AND {_NOT_BLOCKED}
    """
).bindparams(bindparam("users", type_=ARRAY(BigInteger)))

_POSTS_SINCE = text(
    """
    SELECT id FROM posts
    WHERE author_id = ANY(:authors) AND created_at > :since
      AND deleted_at IS NULL AND visibility <> 'private'
    ORDER BY created_at DESC, id DESC LIMIT :n
    """
).bindparams(bindparam("authors", type_=ARRAY(BigInteger)))

# Followers-only and public posts both go to followers only (a home feed is followers'
# business); private ones never get here. Follows and blocks are read now, not from the
# hub's routing cache, so an unfollow or block is honoured at once.
_ALLOWED = text(
    f"""
    SELECT f.follower_id FROM follows f
    WHERE f.followee_id = :author AND f.follower_id = ANY(:users) AND {_NOT_BLOCKED}
    """
).bindparams(bindparam("users", type_=ARRAY(BigInteger)))


async def pull_followees(session: AsyncSession, user_ids: Sequence[int]) -> dict[int, set[int]]:
    """user id -> pull-mode authors they follow (users following none are absent)."""
    out: dict[int, set[int]] = {}
    if not user_ids:
        return out
    rows = await session.execute(_PULL_FOLLOWEES, {"users": list(user_ids), "pull": FANOUT_PULL})
    for follower, followee in rows:
        out.setdefault(follower, set()).add(followee)
    return out


async def posts_since(
    session: AsyncSession, author_ids: Sequence[int], since_ms: int, limit: int
) -> list[tuple[int, int]]:
    """Announceable posts of these authors newer than `since_ms`, newest first, as entries."""
    if not author_ids:
        return []
    since = datetime.fromtimestamp(since_ms / 1000, UTC)
    rows = await session.execute(
        _POSTS_SINCE, {"authors": list(author_ids), "since": since, "n": limit}
    )
    return [(r[0], created_ms(r[0])) for r in rows]


async def allowed_recipients(
    session: AsyncSession, author_id: int, user_ids: Sequence[int]
) -> set[int]:
    """Those of `user_ids` who follow the author now and block neither way."""
    if not user_ids:
        return set()
    rows = await session.execute(_ALLOWED, {"author": author_id, "users": list(user_ids)})
    return {r[0] for r in rows}
