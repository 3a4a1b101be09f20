"""The SQL the write path needs: active followers by keyset, and timeline sources."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.posts.ids import created_ms

_ACTIVE_FOLLOWERS = text(
    """
    SELECT f.follower_id FROM follows f JOIN users u ON u.id = f.follower_id
    WHERE f.followee_id = :author AND f.follower_id > :after AND u.last_active_at >= :since
    ORDER BY f.follower_id LIMIT :n
    """
)

# Newest posts of everyone the user follows: a bounded top-N per followee, then a merge.
# Private posts never enter another user's timeline; deleted ones are skipped here and
# dropped again at read time anyway.
_FOLLOWEE_POSTS = text(
    """
    SELECT p.id FROM follows f
    CROSS JOIN LATERAL (
        SELECT id, created_at FROM posts
        WHERE author_id = f.followee_id AND deleted_at IS NULL AND visibility <> 'private'
          AND created_at >= :since
        ORDER BY created_at DESC, id DESC LIMIT :per_author
    ) p
    WHERE f.follower_id = :user
    ORDER BY p.created_at DESC, p.id DESC LIMIT :n
    """
)

_AUTHOR_POSTS = text(
    """
    SELECT id FROM posts
    WHERE author_id = :author AND deleted_at IS NULL AND visibility <> 'private'
      AND created_at >= :since
    ORDER BY created_at DESC, id DESC LIMIT :n
    """
)


def active_since(active_days: int) -> datetime:
    return datetime.now(UTC) - timedelta(days=active_days)


async def active_followers(
    session: AsyncSession, author_id: int, since: datetime, after: int, limit: int
) -> list[int]:
    """Active follower ids above `after`, in id order: one indexed range scan (keyset)."""
    rows = await session.execute(
        _ACTIVE_FOLLOWERS, {"author": author_id, "after": after, "since": since, "n": limit}
    )
    return [r[0] for r in rows]


def _entries(ids: Sequence[int]) -> list[tuple[int, int]]:
    return [(post_id, created_ms(post_id)) for post_id in ids]


async def followee_posts(
    session: AsyncSession, user_id: int, limit: int, since: datetime, per_author: int = 100
) -> list[tuple[int, int]]:
    rows = await session.execute(
        _FOLLOWEE_POSTS, {"user": user_id, "since": since, "n": limit, "per_author": per_author}
    )
    return _entries([r[0] for r in rows])


async def author_posts(
    session: AsyncSession, author_id: int, limit: int, since: datetime | None = None
) -> list[tuple[int, int]]:
    since = since or datetime.fromtimestamp(0, UTC)
    rows = await session.execute(_AUTHOR_POSTS, {"author": author_id, "since": since, "n": limit})
    return _entries([r[0] for r in rows])
