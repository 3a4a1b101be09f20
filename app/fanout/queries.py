"""The SQL only the write path needs: (active) followers by keyset, and which posts still
reach followers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.types import BigInteger

from app.posts.visibility import reaches_followers_sql

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

# The same read with an upper bound: one half of a split's range (`enqueue_pages`).
_ACTIVE_FOLLOWERS_UNTIL = text(
    """
    SELECT ARRAY(
        SELECT f.follower_id FROM follows f JOIN users u ON u.id = f.follower_id
        WHERE f.followee_id = :author AND f.follower_id > :after AND u.id > :after
          AND f.follower_id <= :until AND u.id <= :until
          AND u.last_active_at >= :since
        ORDER BY f.follower_id LIMIT :n
    )
    """
)

# The follower `n` places after `after` (1 = the next one), from the follows index alone
# (an index-only scan: ~25,000 entries in a few ms, against ~2 us per follower through the
# users join).
_FOLLOWER_AT = text(
    """
    SELECT follower_id FROM follows
    WHERE followee_id = :author AND follower_id > :after
    ORDER BY follower_id OFFSET :skip LIMIT 1
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

_REACHING = text(
    f"SELECT id FROM posts p WHERE id = ANY(:ids) AND {reaches_followers_sql('p')}"
).bindparams(bindparam("ids", type_=ARRAY(BigInteger)))


def active_since(active_days: int) -> datetime:
    return datetime.now(UTC) - timedelta(days=active_days)


async def active_followers(
    session: AsyncSession,
    author_id: int,
    since: datetime,
    after: int,
    limit: int,
    until: int | None = None,
) -> list[int]:
    """Active follower ids above `after` (and up to `until`, when given), in id order: one
    indexed range scan (keyset)."""
    params = {"author": author_id, "after": after, "since": since, "n": limit}
    if until is None:
        ids = await session.scalar(_ACTIVE_FOLLOWERS, params)
    else:
        ids = await session.scalar(_ACTIVE_FOLLOWERS_UNTIL, {**params, "until": until})
    return list(ids or ())


async def follower_at(session: AsyncSession, author_id: int, after: int, n: int) -> int | None:
    """The `n`-th follower id above `after` (active or not; None when there are fewer)."""
    found = await session.scalar(_FOLLOWER_AT, {"author": author_id, "after": after, "skip": n - 1})
    return None if found is None else int(found)


async def followers(session: AsyncSession, author_id: int, after: int, limit: int) -> list[int]:
    """Every follower id above `after` (active or not), in id order: one range scan."""
    ids = await session.scalar(_FOLLOWERS, {"author": author_id, "after": after, "n": limit})
    return list(ids or ())


async def reaching_posts(session: AsyncSession, post_ids: Sequence[int]) -> set[int]:
    """Those of `post_ids` that may still reach followers (alive, not PRIVATE): one PK
    lookup."""
    if not post_ids:
        return set()
    rows = await session.execute(_REACHING, {"ids": [int(p) for p in post_ids]})
    return {r[0] for r in rows}
