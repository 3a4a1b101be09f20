"""Reading and deleting comments (adding one: app.social.engagement.add_comment).

A comment is visible exactly when its post is (app.posts.visibility), less the comments of
users on the other side of a block from the viewer. Pages are keyset-paged on
(created_at, id), oldest first, with the opaque cursors of app.posts.keyset: a comment
added between two pages sorts after every comment already served, so paging on never
repeats or skips one.

Moderation is not reading: a comment's author and its post's author may delete it whatever
hides it from them (a block either way, a narrower visibility), so a block never leaves a
comment up that both of them want gone (decision 0018).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Select,
    bindparam,
    cast,
    delete,
    func,
    select,
    text,
    true,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.db.models import Comment, Post
from app.errors import Forbidden, NotFound
from app.posts.visibility import blocked_sql, visible_to
from app.social.paging import Position, bound

COMMENT_ID_MAX_DIGITS = 19  # a bigint

Page = tuple[list[Comment], bool]  # the comments, and whether more exist


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


def _pages_query(
    viewer_id: int | None, post_ids: Sequence[int], first: int, after: Position | None
) -> Select[Comment]:
    """Each post's first `first` + 1 visible comments after `after`, oldest first: one
    LATERAL page per post, each read through comments_post_idx with its own LIMIT."""
    parent = func.unnest(cast(list(post_ids), ARRAY(BigInteger))).table_valued("id")
    parent = parent.render_derived()
    page = _visible(viewer_id).where(Comment.post_id == parent.c.id)
    if after is not None:
        page = page.where(tuple_(Comment.created_at, Comment.id) > bound(after))
    page = page.order_by(Comment.created_at, Comment.id).limit(first + 1)
    lateral = page.subquery().lateral()
    return (
        select(aliased(Comment, lateral))
        .select_from(parent)
        .join(lateral, true())
        .order_by(lateral.c.post_id, lateral.c.created_at, lateral.c.id)
    )


async def comments_pages(
    session: AsyncSession,
    viewer_id: int | None,
    post_ids: Sequence[int],
    first: int,
    after: Position | None,
) -> dict[int, Page]:
    """The visible comments of each post after the cursor, oldest first, in one query; an
    invisible or unknown post has no visible comments."""
    found: dict[int, list[Comment]] = {post_id: [] for post_id in post_ids}
    for comment in await session.scalars(_pages_query(viewer_id, post_ids, first, after)):
        found[comment.post_id].append(comment)
    return {post_id: (rows[:first], len(rows) > first) for post_id, rows in found.items()}


async def delete_comment(session: AsyncSession, viewer_id: int, comment_id: int) -> None:
    """Delete a comment as its author or its post's author, whatever hides it from them; the
    post's comment count moves in the same transaction. Anyone else: NOT_FOUND for a
    comment they cannot see (existence does not leak), FORBIDDEN for one they can."""
    comment = await session.scalar(
        select(Comment).where(Comment.id == comment_id).with_for_update()
    )
    if comment is None:
        raise NotFound("No such comment.")
    if viewer_id not in (comment.author_id, comment.post_author_id):
        seen = await session.scalar(
            select(_visible(viewer_id).where(Comment.id == comment.id).exists())
        )
        if not seen:
            raise NotFound("No such comment.")
        raise Forbidden("Only the comment's author or the post's author can delete it.")
    await session.execute(delete(Comment).where(Comment.id == comment.id))
    await session.execute(
        update(Post).where(Post.id == comment.post_id).values(comment_count=Post.comment_count - 1)
    )
