"""GraphQL object types (API.md). Rows come from domain services; nothing here queries SQL."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry
from strawberry.types import Info

from app.db import models
from app.db.models import FANOUT_PULL
from app.feed.rows import FeedAuthor, FeedPost


@strawberry.enum
class Visibility(Enum):
    PUBLIC = "public"
    FOLLOWERS = "followers"
    PRIVATE = "private"


@strawberry.enum
class FeedMode(Enum):
    RANKED = "ranked"
    CHRONOLOGICAL = "chronological"


@strawberry.enum
class FanoutMode(Enum):
    PUSH = "push"
    PULL = "pull"


@strawberry.type
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type
class User:
    row: strawberry.Private[models.User | FeedAuthor]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row.id))

    @strawberry.field
    def handle(self) -> str:
        return self.row.handle

    @strawberry.field
    def display_name(self) -> str:
        return self.row.display_name

    @strawberry.field
    def follower_count(self) -> int:
        return self.row.follower_count

    @strawberry.field
    def following_count(self) -> int:
        return self.row.following_count

    @strawberry.field
    def fanout_mode(self) -> FanoutMode:
        return FanoutMode.PULL if self.row.fanout_mode == FANOUT_PULL else FanoutMode.PUSH

    @strawberry.field
    async def viewer_follows(self, info: Info) -> bool:
        return await info.context.loaders.viewer_follows_user.load(self.row.id)

    @strawberry.field
    async def posts(
        self, info: Info, first: int | None = 20, after: str | None = None
    ) -> PostConnection:
        from app.api.resolvers import user_posts

        return await user_posts(info.context, self.row, first, after)


@strawberry.type
class Post:
    row: strawberry.Private[models.Post | FeedPost]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row.id))

    @strawberry.field
    async def author(self, info: Info) -> User:
        author = await info.context.loaders.user_by_id.load(self.row.author_id)
        assert author is not None  # posts.author_id is a foreign key
        return User(row=author)

    @strawberry.field
    def body(self) -> str:
        return self.row.body

    @strawberry.field
    def visibility(self) -> Visibility:
        return Visibility(self.row.visibility)

    @strawberry.field
    def created_at(self) -> datetime:
        return self.row.created_at

    @strawberry.field
    def edited_at(self) -> datetime | None:
        return self.row.edited_at

    @strawberry.field
    def like_count(self) -> int:
        return self.row.like_count

    @strawberry.field
    def comment_count(self) -> int:
        return self.row.comment_count

    @strawberry.field
    async def viewer_has_liked(self, info: Info) -> bool:
        return await info.context.loaders.viewer_liked_post.load(self.row.id)


@strawberry.type
class Comment:
    row: strawberry.Private[models.Comment]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.row.id))

    @strawberry.field
    async def author(self, info: Info) -> User:
        author = await info.context.loaders.user_by_id.load(self.row.author_id)
        assert author is not None
        return User(row=author)

    @strawberry.field
    def body(self) -> str:
        return self.row.body

    @strawberry.field
    def created_at(self) -> datetime:
        return self.row.created_at


@strawberry.type
class PostEdge:
    cursor: str
    node: Post


@strawberry.type
class PostConnection:
    edges: list[PostEdge]
    page_info: PageInfo


@strawberry.type
class FeedConnection:
    edges: list[PostEdge]
    page_info: PageInfo
    session_id: strawberry.ID | None
    degraded: bool


@strawberry.type
class AuthPayload:
    token: str
    user: User


@strawberry.type
class FeedUpdate:
    new_post_count: int
    latest_post_at: datetime | None
