"""Reading and deleting comments (adding one: app.social.engagement.add_comment).

A comment is visible exactly when its post is (app.posts.visibility), less the comments of
users on the other side of a block from the viewer. Pages are keyset-paged on
(created_at, id), oldest first, with the opaque cursors of app.posts.keyset: a comment
added between two pages sorts after every comment already served, so paging on never
repeats or skips one.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Select, bindparam, delete, select, text, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Comment, Post
from app.errors import Forbidden, NotFound
from app.posts.visibility import blocked_sql, visible_to

COMMENT_ID_MAX_DIGITS = 19  # a bigint


def _visible(viewer_id: int | None) -> Select[Comment]:
    """Comments the viewer may see: their post is visible, their author not across a block."""
    query = select(Comment).join(Post, Post.id == Comment.post_id).where(visible_to(viewer_id))
    if viewer_id is not None:
        across_block = text(f"NOT {blocked_sql(':comment_viewer', 'comments.author_id')}")
        query = query.where(
            across_block.bindparams(bindparam("comment_viewer", viewer_id, type_=BigInteger))
        )
    return query


def parse_comment_id(raw: str) -> int | None:
    """A comment id as the API shows it (decimal digits), or None when it cannot be one."""
    if not raw.isascii() or not raw.isdigit() or len(raw) > COMMENT_ID_MAX_DIGITS:
        return None
    value = int(raw)
    return value if 0 < value < 2**63 else None


async def comments_page(
    session: AsyncSession,
    viewer_id: int | None,
    post_id: int,
    first: int,
    after: tuple[datetime, int] | None,
) -> tuple[list[Comment], bool]:
    """The visible comments of a post after the cursor, oldest first; one extra row tells
    whether more exist. An invisible or unknown post has no visible comments."""
    query = _visible(viewer_id).where(Comment.post_id == post_id)
    if after is not None:
        query = query.where(tuple_(Comment.created_at, Comment.id) > tuple_(*after))
    query = query.order_by(Comment.created_at, Comment.id).limit(first + 1)
    rows = list(await session.scalars(query))
    return rows[:first], len(rows) > first


async def delete_comment(session: AsyncSession, viewer_id: int, comment_id: int) -> None:
    """Delete a comment the viewer can see, as its author or the post's author; the post's
    comment count moves in the same transaction. NOT_FOUND for an unknown or invisible
    comment (existence does not leak), FORBIDDEN for anyone else."""
    comment = await session.scalar(
        _visible(viewer_id).where(Comment.id == comment_id).with_for_update(of=Comment)
    )
    if comment is None:
        raise NotFound("No such comment.")
    if viewer_id not in (comment.author_id, comment.post_author_id):
        raise Forbidden("Only the comment's author or the post's author can delete it.")
    gone = await session.scalar(
        delete(Comment).where(Comment.id == comment.id).returning(Comment.post_id)
    )
    if gone is not None:
        await session.execute(
            update(Post).where(Post.id == gone).values(comment_count=Post.comment_count - 1)
        )
