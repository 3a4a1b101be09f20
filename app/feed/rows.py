"""Authoritative checks for feed candidates, in SQL, against the CURRENT state.

Every id that leaves the read path passed `feed_rows` in the same request: alive, not
private (unless the viewer's own), author followed now (or the viewer), no block either way.
Timelines and caches only ever propose ids; this query decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.posts.ids import created_ms

_FEED_ROWS = text(
    """
    SELECT p.id, p.author_id, p.like_count, p.comment_count, p.version, p.visibility,
           p.created_at, p.edited_at
    FROM posts p
    WHERE p.id = ANY(:ids) AND p.deleted_at IS NULL
      AND (p.author_id = :viewer OR (
            p.visibility <> 'private'
            AND EXISTS (SELECT 1 FROM follows f
                        WHERE f.follower_id = :viewer AND f.followee_id = p.author_id)
            AND NOT EXISTS (SELECT 1 FROM blocks b
                            WHERE (b.blocker_id = :viewer AND b.blocked_id = p.author_id)
                               OR (b.blocker_id = p.author_id AND b.blocked_id = :viewer))))
    """
)

_BODIES = text("SELECT id, version, body FROM posts WHERE id = ANY(:ids)")

# Where candidates come from besides Redis: the viewer's graph and own posts, plus the
# recent likes/comments that make author affinity. One round trip.
_VIEWER_CONTEXT = text(
    """
    SELECT 1 AS kind, f.followee_id AS id, 0 AS n
    FROM follows f JOIN users u ON u.id = f.followee_id
    WHERE f.follower_id = :viewer
      AND (u.fanout_mode = 1 OR f.created_at >= :recent OR u.fanout_mode_changed_at >= :recent)
    UNION ALL
    SELECT 2, o.id, 0 FROM (
        SELECT id FROM posts WHERE author_id = :viewer AND deleted_at IS NULL
        ORDER BY created_at DESC, id DESC LIMIT :own
    ) o
    UNION ALL
    SELECT 3, l.author_id, count(*) FROM (
        SELECT author_id FROM likes WHERE user_id = :viewer ORDER BY post_id DESC LIMIT 500
    ) l GROUP BY l.author_id
    UNION ALL
    SELECT 4, c.post_author_id, count(*) FROM (
        SELECT post_author_id FROM comments WHERE author_id = :viewer ORDER BY id DESC LIMIT 200
    ) c GROUP BY c.post_author_id
    """
)

# Fallback source when Redis cannot answer: newest posts of followees, bounded per author,
# strictly older than a post id (ids are time-ordered, so this is the keyset bound).
_FOLLOWEE_POSTS_BEFORE = text(
    """
    SELECT p.id FROM follows f
    CROSS JOIN LATERAL (
        SELECT id, created_at FROM posts
        WHERE author_id = f.followee_id AND deleted_at IS NULL AND visibility <> 'private'
          AND id < :before
        ORDER BY created_at DESC, id DESC LIMIT :n
    ) p
    WHERE f.follower_id = :viewer
    ORDER BY p.created_at DESC, p.id DESC LIMIT :n
    """
)

_RECENT_FOLLOWEE_POSTS = text(
    """
    SELECT p.id FROM follows f
    JOIN posts p ON p.author_id = f.followee_id AND p.created_at >= :since
    WHERE f.follower_id = :viewer AND p.deleted_at IS NULL AND p.visibility <> 'private'
    ORDER BY p.id DESC LIMIT :n
    """
)


@dataclass(frozen=True)
class FeedRow:
    post_id: int
    author_id: int
    likes: int
    comments: int
    version: int
    visibility: str
    created_at: datetime
    edited_at: datetime | None

    @property
    def created_ms(self) -> int:
        return created_ms(self.post_id)


@dataclass(frozen=True)
class ViewerContext:
    pull_authors: list[int]  # followees to pull from: pull mode, just followed, just switched
    own_posts: list[int]
    affinity: dict[int, int]


async def feed_rows(
    session: AsyncSession, viewer_id: int, ids: Sequence[int]
) -> dict[int, FeedRow]:
    if not ids:
        return {}
    rows = await session.execute(_FEED_ROWS, {"ids": list(ids), "viewer": viewer_id})
    return {r.id: FeedRow(*r) for r in rows}


async def bodies(session: AsyncSession, ids: Sequence[int]) -> dict[int, tuple[int, str]]:
    if not ids:
        return {}
    rows = await session.execute(_BODIES, {"ids": list(ids)})
    return {r.id: (r.version, r.body) for r in rows}


async def viewer_context(
    session: AsyncSession, viewer_id: int, recent: datetime, own: int
) -> ViewerContext:
    pull: list[int] = []
    mine: list[int] = []
    affinity: dict[int, int] = {}
    rows = await session.execute(
        _VIEWER_CONTEXT, {"viewer": viewer_id, "recent": recent, "own": own}
    )
    for kind, ident, n in rows:
        if kind == 1:
            pull.append(ident)
        elif kind == 2:
            mine.append(ident)
        else:
            affinity[ident] = affinity.get(ident, 0) + int(n)
    return ViewerContext(pull, mine, affinity)


async def followee_posts_before(
    session: AsyncSession, viewer_id: int, before_id: int, limit: int
) -> list[int]:
    rows = await session.execute(
        _FOLLOWEE_POSTS_BEFORE, {"viewer": viewer_id, "before": before_id, "n": limit}
    )
    return [r[0] for r in rows]


async def recent_followee_posts(
    session: AsyncSession, viewer_id: int, since: datetime, limit: int
) -> list[int]:
    rows = await session.execute(
        _RECENT_FOLLOWEE_POSTS, {"viewer": viewer_id, "since": since, "n": limit}
    )
    return [r[0] for r in rows]
