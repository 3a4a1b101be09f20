"""The SQL only the write path needs: active followers by keyset."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

# One row holding an array: asyncpg decodes bigint[] in C, where 50,000 rows through the ORM's
# result machinery cost 2-3x the query itself (profiled in the splitter).
_ACTIVE_FOLLOWERS = text(
    """
    SELECT ARRAY(
        SELECT f.follower_id FROM follows f JOIN users u ON u.id = f.follower_id
        WHERE f.followee_id = :author AND f.follower_id > :after AND u.last_active_at >= :since
        ORDER BY f.follower_id LIMIT :n
    )
    """
)


def active_since(active_days: int) -> datetime:
    return datetime.now(UTC) - timedelta(days=active_days)


async def active_followers(
    session: AsyncSession, author_id: int, since: datetime, after: int, limit: int
) -> list[int]:
    """Active follower ids above `after`, in id order: one indexed range scan (keyset)."""
    ids = await session.scalar(
        _ACTIVE_FOLLOWERS, {"author": author_id, "after": after, "since": since, "n": limit}
    )
    return list(ids or ())
