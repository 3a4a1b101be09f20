"""Shared resolver bodies: argument checks and mapping domain rows to GraphQL types."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from app.api.types import PageInfo, Post, PostConnection, PostEdge
from app.db import models
from app.errors import BadInput
from app.posts import keyset
from app.posts.ids import MAX_STORED_ID

if TYPE_CHECKING:
    from app.api.context import Context

PAGE_MIN, PAGE_MAX = 1, 100


def check_first(first: int | None) -> int:
    if first is None:
        return 20
    if not PAGE_MIN <= first <= PAGE_MAX:
        raise BadInput(f"'first' must be between {PAGE_MIN} and {PAGE_MAX}.")
    return first


def connection(posts: list[models.Post], has_next: bool, has_previous: bool) -> PostConnection:
    edges = [PostEdge(cursor=keyset.encode(p.created_at, p.id), node=Post(row=p)) for p in posts]
    return PostConnection(edges=edges, page_info=page_info(edges, has_next, has_previous))


class Edge(Protocol):
    @property
    def cursor(self) -> str: ...


def page_info(edges: Sequence[Edge], has_next: bool, has_previous: bool) -> PageInfo:
    return PageInfo(
        has_next_page=has_next,
        has_previous_page=has_previous,
        start_cursor=edges[0].cursor if edges else None,
        end_cursor=edges[-1].cursor if edges else None,
    )


async def user_posts(
    ctx: Context, author: models.User, first: int | None, after: str | None
) -> PostConnection:
    size = check_first(first)
    position = keyset.decode(after) if after else None
    if position is not None and not 0 < position[1] <= MAX_STORED_ID:
        raise BadInput("The 'after' cursor is not valid; use an endCursor from a page.")
    ctx.viewer()  # a bad token fails here too
    # Batched: `posts` of every user in the response in one query (app.api.loaders).
    posts, has_next = await ctx.loaders.author_posts.load((author.id, size, position))
    ctx.loaders.prime_posts(posts)
    return connection(posts, has_next, position is not None)
