"""The SQL only the write path needs: (active) followers by keyset, and which posts still
reach followers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.types import BigInteger

from app.posts.visibility import reaches_followers_sql, unrestricted_sql

# One row holding an array: asyncpg decodes bigint[] in C, where 50,000 rows through the ORM's
# result machinery cost 2-3x the query itself (profiled in the splitter).
# `u.id > :after` repeats the keyset bound on the users side: the planner merges the two
# index scans, and without it the users scan starts at the first id, so the page after
# 30,000 followers read 37,000 users rows (33 ms instead of 9 for 7,000 ids; decision 0054).
_ACTIVE_FOLLOWERS = text(
    """
    SELECT ARRAY(
        SELECT f.follower_id FROM follows f JOIN users u ON u.id = f.follower_id
        WHERE f.followee_id = :author AND f.follower_id > :after AND u.id > :after
          AND u.last_active_at >= :since
        ORDER BY f.follower_id LIMIT :n
    )
    """
)

_FOLLOWERS = text(
    """
    SELECT ARRAY(
        SELECT follower_id FROM follows
        WHERE followee_id = :author AND follower_id > :after
        ORDER BY follower_id LIMIT :n
    )
    """
)

# What a fan-out may announce in live counts: reaching followers, and restricted in no region
# (a count does not know its user's region: decision 0088; the timeline entry is written
# anyway, and each reader's filter judges it in the reader's region).
_REACHING = text(
    f"SELECT id FROM posts p WHERE id = ANY(:ids) AND {reaches_followers_sql('p')}"
    f" AND {unrestricted_sql('p')}"
).bindparams(bindparam("ids", type_=ARRAY(BigInteger)))


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


async def followers(session: AsyncSession, author_id: int, after: int, limit: int) -> list[int]:
    """Every follower id above `after` (active or not), in id order: one range scan."""
    ids = await session.scalar(_FOLLOWERS, {"author": author_id, "after": after, "n": limit})
    return list(ids or ())


async def reaching_posts(session: AsyncSession, post_ids: Sequence[int]) -> set[int]:
    """Those of `post_ids` that may still be announced to followers (alive, not PRIVATE,
    restricted nowhere): one PK lookup."""
    if not post_ids:
        return set()
    rows = await session.execute(_REACHING, {"ids": [int(p) for p in post_ids]})
    return {r[0] for r in rows}
