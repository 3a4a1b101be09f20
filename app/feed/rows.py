"""Authoritative checks for feed candidates, in SQL, against the CURRENT state.

Every id that leaves the read path passed `feed_rows` in the same request: alive, not
private (unless the viewer's own), author followed now (or the viewer), no block either way.
Timelines and caches only ever propose ids; this query decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

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

# Where candidates come from besides Redis: the viewer's graph and own posts, plus (RANKED
# first pages only) the recent likes/comments that make author affinity. One round trip.
_CONTEXT_SOURCES = """
    SELECT 1 AS kind, f.followee_id AS id, 0 AS n
    FROM follows f JOIN users u ON u.id = f.followee_id
    WHERE f.follower_id = :viewer
      AND (u.fanout_mode = 1 OR f.created_at >= :recent OR u.fanout_mode_changed_at >= :recent)
    UNION ALL
    SELECT 2, o.id, 0 FROM (
        SELECT id FROM posts WHERE author_id = :viewer AND deleted_at IS NULL
        ORDER BY created_at DESC, id DESC LIMIT :own
    ) o
"""
_CONTEXT_AFFINITY = """
    UNION ALL
    SELECT 3, l.author_id, count(*) FROM (
        SELECT author_id FROM likes WHERE user_id = :viewer ORDER BY post_id DESC LIMIT 500
    ) l GROUP BY l.author_id
    UNION ALL
    SELECT 4, c.post_author_id, count(*) FROM (
        SELECT post_author_id FROM comments WHERE author_id = :viewer ORDER BY id DESC LIMIT 200
    ) c GROUP BY c.post_author_id
"""
_VIEWER_CONTEXT = text(_CONTEXT_SOURCES + _CONTEXT_AFFINITY)
_VIEWER_SOURCES = text(_CONTEXT_SOURCES)

# What the page's Post and User fields need besides the rows: the authors and which of the
# page's posts the viewer liked, in one round trip (instead of one DataLoader query each).
_PAGE_EXTRAS = text(
    """
    SELECT u.id, u.handle, u.display_name, u.follower_count, u.following_count, u.fanout_mode
    FROM users u WHERE u.id = ANY(:authors)
    UNION ALL
    SELECT l.post_id, NULL, NULL, NULL, NULL, NULL
    FROM likes l WHERE l.user_id = :viewer AND l.post_id = ANY(:posts)
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


class FeedRow(NamedTuple):
    """A candidate that passed the filter. A tuple: ranked first pages build ~600 per read."""

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


@dataclass(slots=True)
class FeedPost:
    """A hydrated page post: the attributes the GraphQL Post type reads, without the cost of
    building ORM instances for rows that are only ever read."""

    id: int
    author_id: int
    created_at: datetime
    body: str
    visibility: str
    version: int
    edited_at: datetime | None
    like_count: int
    comment_count: int


@dataclass(slots=True)
class FeedAuthor:
    """A page post's author: the attributes the GraphQL User type reads."""

    id: int
    handle: str
    display_name: str
    follower_count: int
    following_count: int
    fanout_mode: int


@dataclass(frozen=True)
class ViewerContext:
    pull_authors: list[int]  # followees to pull from: pull mode, just followed, just switched
    own_posts: list[int]
    affinity: dict[int, int]  # empty unless asked for (RANKED first pages)


@lru_cache(maxsize=8)
def read_sessions(sessions: async_sessionmaker[AsyncSession]) -> async_sessionmaker[AsyncSession]:
    """The same engine and pool in autocommit, for the read path's lone SELECTs.

    Every feed query runs in its own short session anyway; in the default mode each of them
    also pays a BEGIN and a ROLLBACK round trip to Postgres (asyncpg), i.e. three round trips
    per query instead of one. A single SELECT in autocommit sees one consistent snapshot, so
    nothing about what it returns changes.
    """
    engine = sessions.kw["bind"]
    return async_sessionmaker(
        engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False
    )


async def feed_rows(
    session: AsyncSession, viewer_id: int, ids: Sequence[int]
) -> dict[int, FeedRow]:
    if not ids:
        return {}
    rows = await session.execute(_FEED_ROWS, {"ids": list(ids), "viewer": viewer_id})
    return {r[0]: FeedRow._make(r) for r in rows}


async def bodies(session: AsyncSession, ids: Sequence[int]) -> dict[int, tuple[int, str]]:
    if not ids:
        return {}
    rows = await session.execute(_BODIES, {"ids": list(ids)})
    return {r.id: (r.version, r.body) for r in rows}


async def viewer_context(
    session: AsyncSession, viewer_id: int, recent: datetime, own: int, affinity: bool = True
) -> ViewerContext:
    """Pull sources, own posts and (if `affinity`) per-author engagement, in one query."""
    pull: list[int] = []
    mine: list[int] = []
    weights: dict[int, int] = {}
    rows = await session.execute(
        _VIEWER_CONTEXT if affinity else _VIEWER_SOURCES,
        {"viewer": viewer_id, "recent": recent, "own": own},
    )
    for kind, ident, n in rows:
        if kind == 1:
            pull.append(ident)
        elif kind == 2:
            mine.append(ident)
        else:
            weights[ident] = weights.get(ident, 0) + int(n)
    return ViewerContext(pull, mine, weights)


async def page_extras(
    session: AsyncSession, viewer_id: int, author_ids: Sequence[int], post_ids: Sequence[int]
) -> tuple[dict[int, FeedAuthor], set[int]]:
    """(authors by id, ids of the given posts the viewer liked)."""
    authors: dict[int, FeedAuthor] = {}
    liked: set[int] = set()
    rows = await session.execute(
        _PAGE_EXTRAS,
        {"authors": list(author_ids), "posts": list(post_ids), "viewer": viewer_id},
    )
    for row in rows:
        if row[1] is None:
            liked.add(row[0])
        else:
            authors[row[0]] = FeedAuthor(*row)
    return authors, liked


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
