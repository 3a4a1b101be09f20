"""Who follows a user and whom a user follows: pages of users, newest edge first.

Keyset-paged on the edge's (follows.created_at, other user's id), descending, with the opaque
cursors of app.posts.keyset; a follow made between two pages sorts before every edge already
served, so paging on never repeats or skips one. Users across a block from the viewer are
left out, and a user across a block from the viewer has empty lists: a block hides the graph
both ways (the rule: app.posts.visibility; decision 0018).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import Enum

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Select,
    bindparam,
    cast,
    func,
    select,
    text,
    true,
    tuple_,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.models import Follow, User
from app.posts.visibility import blocked_sql
from app.social.paging import Position, bound

Page = tuple[list[tuple[User, datetime]], bool]  # (user, when the edge was made), more exist


class Direction(Enum):
    FOLLOWERS = "followers"  # the users who follow the listed user
    FOLLOWING = "following"  # the users the listed user follows


def _pages_query(
    viewer_id: int | None,
    user_ids: Sequence[int],
    direction: Direction,
    first: int,
    after: Position | None,
) -> Select[int, User, datetime]:
    """Each listed user's newest `first` + 1 edges older than `after`: one LATERAL page per
    listed user through follows_followee_created_idx / follows_follower_created_idx."""
    if direction is Direction.FOLLOWERS:
        listed, other = Follow.followee_id, Follow.follower_id
    else:
        listed, other = Follow.follower_id, Follow.followee_id
    owner = func.unnest(cast(list(user_ids), ARRAY(BigInteger))).table_valued("id")
    owner = owner.render_derived(name="listed")
    edge = select(Follow.created_at.label("at"), other.label("other_id")).where(
        listed == owner.c.id
    )
    if viewer_id is not None:
        hidden = (
            f"NOT {blocked_sql(':list_viewer', 'listed.id')}"
            f" AND NOT {blocked_sql(':list_viewer', f'follows.{other.key}')}"
        )
        edge = edge.where(
            text(hidden).bindparams(bindparam("list_viewer", viewer_id, type_=BigInteger))
        )
    if after is not None:
        edge = edge.where(tuple_(Follow.created_at, other) < bound(after))
    lateral = edge.order_by(Follow.created_at.desc(), other.desc()).limit(first + 1)
    page = lateral.subquery().lateral()
    person = aliased(User)
    return (
        select(owner.c.id, person, page.c.at)
        .select_from(owner)
        .join(page, true())
        .join(person, person.id == page.c.other_id)
        .order_by(owner.c.id, page.c.at.desc(), page.c.other_id.desc())
    )


async def follow_pages(
    session: AsyncSession,
    viewer_id: int | None,
    user_ids: Sequence[int],
    direction: Direction,
    first: int,
    after: Position | None,
) -> dict[int, Page]:
    """One page per listed user, newest edge first, in one query; one extra row tells
    whether more exist."""
    found: dict[int, list[tuple[User, datetime]]] = {user_id: [] for user_id in user_ids}
    rows = await session.execute(_pages_query(viewer_id, user_ids, direction, first, after))
    for owner_id, user, at in rows:
        found[owner_id].append((user, at))
    return {user_id: (rows[:first], len(rows) > first) for user_id, rows in found.items()}
