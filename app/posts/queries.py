"""Posts as timeline entries, (post id, created ms), from Postgres: what home timelines and
author indexes are built from (fan-out backfills and rebuilds, the read path's repair of a
lost author index). Only posts that reach followers (app.posts.visibility) are entries;
readers re-check every id against the current rows anyway."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.posts.ids import created_ms
from app.posts.visibility import reaches_followers_sql

# Newest posts of everyone the user follows: a bounded top-N per followee, then a merge.
_FOLLOWEE_POSTS = text(
    f"""
    SELECT p.id FROM follows f
    CROSS JOIN LATERAL (
        SELECT id, created_at FROM posts
        WHERE author_id = f.followee_id AND {reaches_followers_sql("posts")}
          AND created_at >= :since
        ORDER BY created_at DESC, id DESC LIMIT :per_author
    ) p
    WHERE f.follower_id = :user
    ORDER BY p.created_at DESC, p.id DESC LIMIT :n
    """
)

_AUTHOR_POSTS = text(
    f"""
    SELECT id FROM posts
    WHERE author_id = :author AND {reaches_followers_sql("posts")}
      AND created_at >= :since
    ORDER BY created_at DESC, id DESC LIMIT :n
    """
)


def _entries(ids: Sequence[int]) -> list[tuple[int, int]]:
    return [(post_id, created_ms(post_id)) for post_id in ids]


async def followee_posts(
    session: AsyncSession, user_id: int, limit: int, since: datetime, per_author: int = 100
) -> list[tuple[int, int]]:
    """The newest entries of the authors the user follows, newest first (a rebuild)."""
    rows = await session.execute(
        _FOLLOWEE_POSTS, {"user": user_id, "since": since, "n": limit, "per_author": per_author}
    )
    return _entries([r[0] for r in rows])


async def author_posts(
    session: AsyncSession, author_id: int, limit: int, since: datetime | None = None
) -> list[tuple[int, int]]:
    """An author's newest entries, newest first (a follow backfill, an author index)."""
    since = since or datetime.fromtimestamp(0, UTC)
    rows = await session.execute(_AUTHOR_POSTS, {"author": author_id, "since": since, "n": limit})
    return _entries([r[0] for r in rows])
