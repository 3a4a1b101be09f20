"""Resolver bodies for profiles and user search (issue 14): argument checks and mapping
domain rows to GraphQL types; the rules live in app.social and app.users. (Comments and
follower lists are fields of the types: app.api.schema.types over app.api.schema.resolvers.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.api.schema.resolvers import check_first
from app.api.schema.types import User
from app.db import models
from app.feed.rows import read_sessions
from app.users.search import search_users

if TYPE_CHECKING:
    from app.api.schema.context import Context

SEARCH_DEFAULT = 10


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
