"""Query root."""

from __future__ import annotations

import strawberry
from strawberry.types import Info

from app.api.schema.context import Context
from app.api.schema.feed import resolve_feed
from app.api.schema.social import find_users, profile
from app.api.schema.types import FeedConnection, FeedMode, Post, User
from app.posts.ids import parse_post_id
from app.users.service import by_handle


@strawberry.type
class Query:
    @strawberry.field(description="The logged-in user, or null without a token.")
    async def viewer(self, info: Info[Context, None]) -> User | None:
        viewer_id = info.context.viewer()
        if viewer_id is None:
            return None
        row = await info.context.loaders.user_by_id.load(viewer_id)
        return User(row=row) if row is not None else None

    @strawberry.field
    async def user(self, info: Info[Context, None], handle: str) -> User | None:
        info.context.viewer()
        async with info.context.state.sessions() as session:
            row = await by_handle(session, handle)
        if row is None:
            return None
        info.context.loaders.user_by_id.prime(row.id, row)
        return await profile(info.context, row)  # across a block: no graph

    @strawberry.field(description="A post, or null when it does not exist or is hidden from you.")
    async def post(self, info: Info[Context, None], id: strawberry.ID) -> Post | None:
        info.context.viewer()
        post_id = parse_post_id(str(id))
        if post_id is None:
            return None
        row = await info.context.loaders.visible_post_by_id.load(post_id)
        return Post(row=row) if row is not None else None

    @strawberry.field(description="The viewer's home feed. Needs a token.")
    async def feed(
        self,
        info: Info[Context, None],
        first: int | None = 20,
        after: str | None = None,
        mode: FeedMode | None = FeedMode.RANKED,
    ) -> FeedConnection:
        return await resolve_feed(info, first, after, mode)

    @strawberry.field(
        description="Users whose handle or display name starts with `prefix` (any case)."
    )
    async def search_users(
        self, info: Info[Context, None], prefix: str, first: int | None = 10
    ) -> list[User]:
        return await find_users(info.context, prefix, first)
