"""The SQL the hub needs: whom a subscriber follows in pull mode, their posts since the last
reset, and the final check that a pull-mode post may be announced to these users; and the
authors of counted posts, for an unfollow or block to remove the pair's posts from a count."""

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


_AUTHORS = text("SELECT id, author_id FROM posts WHERE id = ANY(:ids)").bindparams(
    bindparam("ids", type_=ARRAY(BigInteger))
)

# Posts the user may be told about now: the author is followed, since before the post (a
# refollow does not bring old posts back as "new"), no block either way, still visible.
_COUNTABLE = text(
    """
    SELECT p.id, p.author_id FROM posts p
    JOIN follows f ON f.follower_id = :user AND f.followee_id = p.author_id
    WHERE p.id = ANY(:ids) AND f.created_at < p.created_at
      AND p.deleted_at IS NULL AND p.visibility <> 'private'
      AND NOT EXISTS (
        SELECT 1 FROM blocks b
        WHERE (b.blocker_id = :user AND b.blocked_id = p.author_id)
           OR (b.blocker_id = p.author_id AND b.blocked_id = :user)
      )
    """
).bindparams(bindparam("ids", type_=ARRAY(BigInteger)))


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


async def post_authors(session: AsyncSession, post_ids: Sequence[int]) -> dict[int, int]:
    """post id -> author id (ids of posts that no longer exist are absent); one PK lookup."""
    if not post_ids:
        return {}
    rows = await session.execute(_AUTHORS, {"ids": list(post_ids)})
    return {r[0]: r[1] for r in rows}


async def countable_entries(
    session: AsyncSession, user_id: int, entries: Sequence[Sequence[int]]
) -> list[tuple[int, int, int]]:
    """Those of `entries` ((post id, ms), e.g. a subscriber's catch-up from the timeline) the
    user may be told about now, as (post id, ms, author id): the graph is read now, so a
    timeline the async cleanup has not reached yet (or a fan-out that lagged behind it) brings
    back nothing of someone unfollowed or blocked. One SQL query."""
    if not entries:
        return []
    ms = {int(e[0]): int(e[1]) for e in entries}
    rows = await session.execute(_COUNTABLE, {"user": user_id, "ids": list(ms)})
    return [(r[0], ms[r[0]], r[1]) for r in rows]
