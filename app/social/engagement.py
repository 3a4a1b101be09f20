"""Likes and flat comments. Aggregate counts on the post move in the same transaction."""

from __future__ import annotations

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Comment, CommentIdempotencyKey, Like, Post
from app.errors import BadInput, NotFound
from app.posts.service import (
    IDEMPOTENCY_KEY_MAX,
    IDEMPOTENCY_KEY_TTL_SECONDS,
    key_expired,
    visible_post,
)
from app.posts.visibility import visible_to
from app.text_rules import Kind, clean


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


async def unlike(session: AsyncSession, viewer_id: int, post_id: int) -> Post | None:
    """Take the viewer's like back, whether or not they may still see the post (a block or
    a narrower visibility must not pin a like on it); the post, or None when it is hidden
    from the viewer now (the caller answers NOT_FOUND, after the commit)."""
    gone = await session.scalar(
        delete(Like)
        .where(Like.post_id == post_id, Like.user_id == viewer_id)
        .returning(Like.post_id)
    )
    if gone is not None:
        await session.execute(
            update(Post).where(Post.id == post_id).values(like_count=Post.like_count - 1)
        )
    return await session.scalar(
        select(Post)
        .where(Post.id == post_id, visible_to(viewer_id))
        .execution_options(populate_existing=True)
    )


def _check_key(key: str) -> None:
    if not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX:
        raise BadInput(f"An idempotency key is 1-{IDEMPOTENCY_KEY_MAX} characters.")


# createPost's contract (app.posts.service.DELETED_POST): a replayed key whose comment, or
# the post it was on, was deleted since answers NOT_FOUND.
DELETED_COMMENT = "The comment created with this idempotency key was deleted."
DELETED_COMMENT_POST = "The post of the comment created with this idempotency key was deleted."


async def _claim_key(
    session: AsyncSession, viewer_id: int, post_id: int, key: str, ttl_seconds: int
) -> tuple[int, Comment | None]:
    """Claim `key` for a new comment: (the new comment's id, None), or (its id, the comment)
    when the key was used before, less than `ttl_seconds` ago (an older use is taken over).
    The key's primary key is claimed before the comment exists, so a concurrent duplicate
    waits on it until the first commits, then finds its comment (or claims the key itself if
    the first rolled back)."""
    new_id = int(await session.scalar(text("SELECT nextval('comments_id_seq')")) or 0)
    claim = pg_insert(CommentIdempotencyKey).values(
        user_id=viewer_id, key=key, comment_id=new_id, post_id=post_id
    )
    claimed = await session.scalar(
        claim.on_conflict_do_update(
            index_elements=[CommentIdempotencyKey.user_id, CommentIdempotencyKey.key],
            set_={
                "comment_id": claim.excluded.comment_id,
                "post_id": claim.excluded.post_id,
                "created_at": func.now(),
            },
            where=key_expired(CommentIdempotencyKey.created_at, ttl_seconds),
        ).returning(CommentIdempotencyKey.comment_id)
    )
    if claimed is not None:
        return new_id, None
    used = await session.get_one(CommentIdempotencyKey, (viewer_id, key))
    if used.post_id != post_id:
        raise BadInput("This idempotency key was used for a comment on another post.")
    comment = await session.get(Comment, used.comment_id)
    if comment is None:
        raise NotFound(DELETED_COMMENT)
    on = await session.scalar(select(Post.deleted_at).where(Post.id == used.post_id))
    if on is not None:
        raise NotFound(DELETED_COMMENT_POST)
    return used.comment_id, comment


async def add_comment(
    session: AsyncSession,
    viewer_id: int,
    post_id: int,
    body: str,
    max_chars: int,
    idempotency_key: str | None = None,
    key_ttl_seconds: int = IDEMPOTENCY_KEY_TTL_SECONDS,
) -> Comment:
    """Add a comment to a post the viewer may see; the same idempotency key from the same
    user within `key_ttl_seconds` returns the first comment (createPost's contract),
    whatever the post's visibility since, and adds and counts nothing; NOT_FOUND once the
    comment or its post was deleted."""
    body = clean("comment", body, Kind.BODY).strip()  # NFC, no stray controls or bidi
    if not 1 <= len(body) <= max_chars:
        raise BadInput(f"A comment is 1-{max_chars} characters after trimming.")
    comment_id = None
    if idempotency_key is not None:
        _check_key(idempotency_key)
        comment_id, earlier = await _claim_key(
            session, viewer_id, post_id, idempotency_key, key_ttl_seconds
        )
        if earlier is not None:
            return earlier
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
    if comment_id is not None:
        comment.id = comment_id
    session.add(comment)
    await session.flush()
    await session.refresh(comment)
    return comment
