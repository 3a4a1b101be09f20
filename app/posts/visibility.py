"""Who may see a post. One SQL predicate, used by every query that returns posts."""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, exists, false, or_, select
from sqlalchemy.orm import InstrumentedAttribute

from app.db.models import Block, Follow, Post


def blocked_between(
    viewer_id: int, author_col: ColumnElement[int] | InstrumentedAttribute[int]
) -> ColumnElement[bool]:
    """True when either side blocked the other: nothing flows between them."""
    return exists(
        select(Block.blocker_id).where(
            or_(
                and_(Block.blocker_id == viewer_id, Block.blocked_id == author_col),
                and_(Block.blocker_id == author_col, Block.blocked_id == viewer_id),
            )
        )
    )


def visible_to(viewer_id: int | None) -> ColumnElement[bool]:
    """Post rows the viewer may see now: not deleted, allowed by visibility, no block."""
    alive = Post.deleted_at.is_(None)
    if viewer_id is None:
        return and_(alive, Post.visibility == "public")
    follows_author = exists(
        select(Follow.follower_id).where(
            Follow.follower_id == viewer_id, Follow.followee_id == Post.author_id
        )
    )
    others = and_(
        or_(
            Post.visibility == "public",
            and_(Post.visibility == "followers", follows_author),
            false(),
        ),
        ~blocked_between(viewer_id, Post.author_id),
    )
    return and_(alive, or_(Post.author_id == viewer_id, others))
