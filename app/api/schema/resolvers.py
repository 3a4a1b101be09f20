"""Shared resolver bodies below the types: argument checks and the reads a connection field
makes (through the request's DataLoaders), returning rows; app.api.schema.types maps them to GraphQL
types. This module imports no GraphQL type, so the types can call it at import time (no
import circle: types -> resolvers, never back)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from app.db import models
from app.errors import BadInput
from app.posts import keyset
from app.posts.ids import MAX_STORED_ID
from app.social import feedback
from app.social.follow_lists import Direction

if TYPE_CHECKING:
    from app.api.schema.context import Context

PAGE_MIN, PAGE_MAX = 1, 100
BIGINT_MAX = 2**63 - 1  # comments.id, users.id

Position = tuple[datetime, int]


def check_first(first: int | None) -> int:
    if first is None:
        return 20
    if not PAGE_MIN <= first <= PAGE_MAX:
        raise BadInput(f"'first' must be between {PAGE_MIN} and {PAGE_MAX}.")
    return first


def check_after(after: str | None, max_id: int = BIGINT_MAX) -> Position | None:
    """A keyset cursor's position; one whose id no row can have is refused as malformed
    (the driver would fail on it)."""
    position = keyset.decode(after) if after else None
    if position is not None and not 0 < position[1] <= max_id:
        raise BadInput("The 'after' cursor is not valid; use an endCursor from a page.")
    return position


async def user_posts(
    ctx: Context, author_id: int, first: int | None, after: str | None
) -> tuple[list[models.Post], bool, bool]:
    """A user's posts page: (posts, has next page, has previous page)."""
    size = check_first(first)
    position = check_after(after, MAX_STORED_ID)
    ctx.viewer()  # a bad token fails here too
    # Batched: `posts` of every user in the response in one query (app.api.schema.loaders).
    posts, has_next = await ctx.loaders.author_posts.load((author_id, size, position))
    ctx.loaders.prime_posts(posts)
    return posts, has_next, position is not None


async def post_comments(
    ctx: Context, post_id: int, first: int | None, after: str | None
) -> tuple[list[models.Comment], bool, bool]:
    """A post's comments page: (comments, has next page, has previous page)."""
    size = check_first(first)
    position = check_after(after)
    ctx.viewer()  # a bad token fails here too
    # Batched: the comments of every post in the response in one query (app.api.schema.loaders).
    rows, has_next = await ctx.loaders.post_comments.load((post_id, size, position))
    return rows, has_next, position is not None


async def follow_list(
    ctx: Context,
    user_id: int,
    which: Literal["followers", "following"],
    first: int | None,
    after: str | None,
) -> tuple[list[tuple[models.User, datetime]], bool, bool]:
    """A follower or following page: ((user, followed at) pairs, has next, has previous)."""
    size = check_first(first)
    position = check_after(after)
    ctx.viewer()
    direction = Direction.FOLLOWERS if which == "followers" else Direction.FOLLOWING
    # Batched like post_comments; a user across a block from the viewer has empty lists.
    rows, has_next = await ctx.loaders.follow_lists.load((user_id, direction, size, position))
    for user, _ in rows:
        ctx.loaders.user_by_id.prime(user.id, user)
    return rows, has_next, position is not None


async def muted_users(ctx: Context, user_id: int, first: int | None) -> list[models.User] | None:
    """The users `user_id` mutes, most recent first, when `user_id` is the viewer; None for
    anyone else (a user's mutes are theirs alone: the muted are told nothing)."""
    size = check_first(first)
    if ctx.viewer() != user_id:
        return None
    async with ctx.state.sessions() as session:
        rows = list(await feedback.muted_users(session, user_id, size))
    for user in rows:
        ctx.loaders.user_by_id.prime(user.id, user)
        ctx.loaders.viewer_mutes_user.prime(user.id, True)
    return rows
