"""Resolver bodies for comments, follower lists and user search (issue 14): argument checks
and mapping domain rows to GraphQL types; the rules live in app.social and app.users."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from app.api.resolvers import check_first, page_info
from app.api.types import (
    Comment,
    CommentConnection,
    CommentEdge,
    User,
    UserConnection,
    UserEdge,
)
from app.db import models
from app.errors import BadInput
from app.feed.rows import read_sessions
from app.posts import keyset
from app.social.follow_lists import Direction
from app.users.search import search_users

if TYPE_CHECKING:
    from app.api.context import Context

SEARCH_DEFAULT = 10
BIGINT_MAX = 2**63 - 1  # comments.id, users.id


def _position(after: str | None) -> tuple[datetime, int] | None:
    """A keyset cursor's position; one whose id no row can have is refused as malformed
    (the driver would fail on it)."""
    position = keyset.decode(after) if after else None
    if position is not None and not 0 < position[1] <= BIGINT_MAX:
        raise BadInput("The 'after' cursor is not valid; use an endCursor from a page.")
    return position


async def post_comments(
    ctx: Context, post_id: int, first: int | None, after: str | None
) -> CommentConnection:
    size = check_first(first)
    position = _position(after)
    ctx.viewer()  # a bad token fails here too
    # Batched: the comments of every post in the response in one query (app.api.loaders).
    rows, has_next = await ctx.loaders.post_comments.load((post_id, size, position))
    edges = [
        CommentEdge(cursor=keyset.encode(c.created_at, c.id), node=Comment(row=c)) for c in rows
    ]
    return CommentConnection(edges=edges, page_info=page_info(edges, has_next, bool(position)))


async def follow_list(
    ctx: Context,
    user_id: int,
    which: Literal["followers", "following"],
    first: int | None,
    after: str | None,
) -> UserConnection:
    size = check_first(first)
    position = _position(after)
    ctx.viewer()
    direction = Direction.FOLLOWERS if which == "followers" else Direction.FOLLOWING
    # Batched like post_comments; a user across a block from the viewer has empty lists.
    rows, has_next = await ctx.loaders.follow_lists.load((user_id, direction, size, position))
    edges = []
    for user, followed_at in rows:
        ctx.loaders.user_by_id.prime(user.id, user)
        edges.append(UserEdge(cursor=keyset.encode(followed_at, user.id), node=User(row=user)))
    return UserConnection(edges=edges, page_info=page_info(edges, has_next, bool(position)))


async def profile(ctx: Context, row: models.User) -> User:
    """A user asked for by handle (or changed by a graph mutation) as the viewer may see
    them: across a block, either way, without their graph (counts read 0; the lists are
    empty already). Users reached any other way (authors of visible posts and comments,
    list members, search results) are never across a block from the viewer."""
    viewer_id = ctx.viewer()
    if viewer_id is None or viewer_id == row.id:
        return User(row=row)
    return User(row=row, graph_hidden=await ctx.loaders.graph_hidden.load(row.id))


async def find_users(ctx: Context, prefix: str, first: int | None) -> list[User]:
    size = check_first(SEARCH_DEFAULT if first is None else first)
    async with read_sessions(ctx.state.sessions)() as session:
        rows = await search_users(session, ctx.viewer(), prefix, size)
    for row in rows:
        ctx.loaders.user_by_id.prime(row.id, row)
    return [User(row=row) for row in rows]
