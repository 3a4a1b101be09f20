"""The SQL only the write path needs: active followers by keyset."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

_ACTIVE_FOLLOWERS = text(
    """
    SELECT f.follower_id FROM follows f JOIN users u ON u.id = f.follower_id
    WHERE f.followee_id = :author AND f.follower_id > :after AND u.last_active_at >= :since
    ORDER BY f.follower_id LIMIT :n
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
