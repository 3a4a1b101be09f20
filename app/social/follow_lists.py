"""Who follows a user and whom a user follows: pages of users, newest edge first.

Keyset-paged on the edge's (follows.created_at, other user's id), descending, with the opaque
cursors of app.posts.keyset; a follow made between two pages sorts before every edge already
served, so paging on never repeats or skips one. Users across a block from the viewer are
left out (the rule: app.posts.visibility).
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum

from sqlalchemy import BigInteger, bindparam, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Follow, User
from app.posts.visibility import blocked_sql


class Direction(Enum):
    FOLLOWERS = "followers"  # the users who follow the listed user
    FOLLOWING = "following"  # the users the listed user follows


async def follow_page(
    session: AsyncSession,
    viewer_id: int | None,
    user_id: int,
    direction: Direction,
    first: int,
    after: tuple[datetime, int] | None,
) -> tuple[list[tuple[User, datetime]], bool]:
    """One page of (user, when the edge was made), newest edge first; one extra row tells
    whether more exist."""
    if direction is Direction.FOLLOWERS:
        listed, other = Follow.followee_id, Follow.follower_id
    else:
        listed, other = Follow.follower_id, Follow.followee_id
    query = select(User, Follow.created_at).join(Follow, other == User.id).where(listed == user_id)
    if viewer_id is not None:
        across_block = text(f"NOT {blocked_sql(':list_viewer', 'users.id')}")
        query = query.where(
            across_block.bindparams(bindparam("list_viewer", viewer_id, type_=BigInteger))
        )
    if after is not None:
        query = query.where(tuple_(Follow.created_at, other) < tuple_(*after))
    query = query.order_by(Follow.created_at.desc(), other.desc()).limit(first + 1)
    rows = [(user, at) for user, at in await session.execute(query)]
    return rows[:first], len(rows) > first
