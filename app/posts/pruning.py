"""Pruning the synthetic probe's posts (decision 0065): its canaries post ~46,000 times a
day, FOLLOWERS-only within their ring; rows older than CANARY_POSTS_RETENTION_SECONDS are
deleted (not tombstoned: nobody but the ring ever saw them), their likes and comments with
them (ON DELETE CASCADE). Timelines keep the ids until they fall off (TIMELINE_MAX); reads
drop ids without a row, as they drop tombstones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

# One statement per run, bounded: canaries from their partial index, each one's old posts
# from posts_author_created_idx.
PRUNE_SQL = text(
    """
    DELETE FROM posts WHERE id IN (
        SELECT p.id FROM users u
        JOIN posts p ON p.author_id = u.id AND p.created_at < :before
        WHERE u.canary
        LIMIT :n
    )
    """
)


async def prune_canary_posts(
    sessions: async_sessionmaker[AsyncSession], retention_seconds: int, limit: int
) -> int:
    """Delete at most `limit` canary posts older than `retention_seconds`; how many."""
    before = datetime.now(UTC) - timedelta(seconds=retention_seconds)
    async with sessions.begin() as session:
        result = await session.execute(PRUNE_SQL, {"before": before, "n": limit})
    return int(getattr(result, "rowcount", 0) or 0)
