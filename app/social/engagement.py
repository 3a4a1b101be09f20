"""Likes and flat comments. Aggregate counts on the post move in the same transaction."""

from __future__ import annotations

from sqlalchemy import delete, func, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Comment, Like, Post
from app.errors import BadInput
from app.posts.service import visible_post


async def like(session: AsyncSession, viewer_id: int, post_id: int) -> Post:
    post = await visible_post(session, viewer_id, post_id)
    made = await session.scalar(
        pg_insert(Like)
        .values(post_id=post.id, user_id=viewer_id, author_id=post.author_id)
        .on_conflict_do_nothing()
        .returning(Like.post_id)
    )
    if made is not None:
        await session.execute(
            update(Post).where(Post.id == post.id).values(like_count=Post.like_count + 1)
        )
        await session.refresh(post)
    return post


async def unlike(session: AsyncSession, viewer_id: int, post_id: int) -> Post:
    post = await visible_post(session, viewer_id, post_id)
    gone = await session.scalar(
        delete(Like)
        .where(Like.post_id == post.id, Like.user_id == viewer_id)
        .returning(Like.post_id)
    )
    if gone is not None:
        await session.execute(
            update(Post).where(Post.id == post.id).values(like_count=Post.like_count - 1)
        )
        await session.refresh(post)
    return post


async def add_comment(
    session: AsyncSession, viewer_id: int, post_id: int, body: str, max_chars: int
) -> Comment:
    body = body.strip()
    if not 1 <= len(body) <= max_chars:
        raise BadInput(f"A comment is 1-{max_chars} characters after trimming.")
    post = await visible_post(session, viewer_id, post_id)
    # Count first: the UPDATE locks the post's row until commit, so a post's comments are
    # inserted one transaction at a time and each takes its time (clock_timestamp, not the
    # transaction's start) after the previous one committed. Their (created_at, id) order is
    # then their commit order, and a reader paging oldest first (app.social.comments) never
    # skips a comment that commits after it read a page.
    await session.execute(
        update(Post).where(Post.id == post.id).values(comment_count=Post.comment_count + 1)
    )
    comment = Comment(
        post_id=post.id,
        author_id=viewer_id,
        post_author_id=post.author_id,
        body=body,
        created_at=func.clock_timestamp(),
    )
    session.add(comment)
    await session.flush()
    await session.refresh(comment)
    return comment
