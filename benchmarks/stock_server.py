"""The feed benchmark's two baselines, served by their own small ASGI app, outside the service:

    uvicorn benchmarks.stock_server:app --port 8001      # DATABASE_URL and SECRET_KEY as the API's

benchmarks/feed_read.py starts it as a second uvicorn process next to `app.web:app`, on its
own port, in the same run. POST /graphql answers two fields that return the API's own object
types (app.api.schema.types: FeedConnection, PostEdge, Post, User, PageInfo) through DataLoaders of
the same names the API's types resolve through, so the Feed selection set of
graphql/operations/feed.graphql runs unchanged, field resolvers included:

- `memoryFeed(first)`: a page of `first` (default 20) posts held in memory with their authors
  and the viewer's likes primed into the loaders: no I/O at all. What GraphQL over HTTP costs
  by itself with stock Strawberry, the ceiling the real `feed` is measured against.
- `naiveFeed(first)`: the textbook query, "join follows with posts, order by created_at desc,
  limit N", against Postgres on every request (no Redis, no ranking, no session); authors and
  likes come from one IN query each.

The schema is plain `strawberry.Schema` with only ParserCache and ValidationCache: no depth,
alias or token limits, no error policy, Strawberry's default JSON encoder. Both baselines are
therefore a little cheaper per request than they would be inside the API, which makes the
API's ratios against them conservative. The viewer comes from the same bearer tokens
(SECRET_KEY), because a page is the viewer's (likes, follows).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import strawberry
from sqlalchemy import select
from sqlalchemy.ext.asyncio import async_sessionmaker
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.dataloader import DataLoader
from strawberry.extensions import ParserCache, ValidationCache
from strawberry.types import Info

from app.api.schema.types import FeedConnection, PageInfo, Post, PostEdge
from app.auth.tokens import user_id_from_header
from app.config import Settings
from app.db import models
from app.db.engine import make_engine
from app.db.models import FANOUT_PULL, FANOUT_PUSH
from app.errors import AppError, BadInput, Unauthenticated
from app.feed.cursor import CursorCodec, SessionPosition
from app.media.hydrate import MediaView
from app.media.store import ObjectStore
from app.media.stores import make_store
from app.media.urls import MediaUrls, UrlPolicy
from app.posts import keyset

MEMORY_POSTS = 100  # the largest page `first` allows
MEMORY_AUTHORS = 25
PAGE_MAX = 100


@dataclass
class MemoryPage:
    posts: list[models.Post]
    users: dict[int, models.User]
    liked: set[int]
    cursors: list[str]


def memory_page() -> MemoryPage:
    """A fixed, realistic-looking page: 100 posts by 25 authors, some liked by the viewer.

    Built once per process. Cursors are real signed session cursors, made once: the same bytes
    on the wire as `feed` sends, but signing them is feed machinery, not GraphQL.
    """
    rng = random.Random(4)
    words = (
        *("coffee", "morning", "deploy", "rust", "graphs", "feed", "ranking", "garden"),
        *("bike", "rain", "tea", "postgres", "redis", "weekend", "coast", "bread", "jazz"),
        *("train", "paper", "lemon", "river", "night", "code", "review", "cat", "window"),
    )
    now = datetime.now(UTC).replace(microsecond=0)
    users = {
        uid: models.User(
            id=uid,
            handle=f"u{uid:06d}",
            display_name=f"Author {uid}",
            follower_count=rng.randint(10, 50_000),
            following_count=rng.randint(1, 500),
            fanout_mode=FANOUT_PULL if uid % 7 == 0 else FANOUT_PUSH,
        )
        for uid in range(1, MEMORY_AUTHORS + 1)
    }
    posts = []
    for n in range(MEMORY_POSTS):
        created = now - timedelta(minutes=3 * n + rng.random())
        posts.append(
            models.Post(
                id=7_300_000_000_000_000_000 - n * 1_000_003,
                author_id=rng.randint(1, MEMORY_AUTHORS),
                created_at=created,
                body=" ".join(rng.choice(words) for _ in range(rng.randint(8, 24))).capitalize(),
                visibility="public" if n % 9 else "followers",
                version=1,
                edited_at=created + timedelta(minutes=1) if n % 13 == 0 else None,
                like_count=rng.randint(0, 300),
                comment_count=rng.randint(0, 40),
            )
        )
    liked = {p.id for p in posts if rng.random() < 0.2}
    codec = CursorCodec("memory-feed")
    cursors = [
        codec.encode(SessionPosition("MemoryPage01", n + 1), "0" * 12) for n in range(MEMORY_POSTS)
    ]
    return MemoryPage(posts, users, liked, cursors)


@dataclass(frozen=True)
class Media:
    """Where images are and how their URLs are minted (the service's settings)."""

    store: ObjectStore
    policy: UrlPolicy


class Loaders:
    """The loaders app.api.schema.types resolves `author`, `viewerHasLiked`, `viewerFollows`
    and `media` through: one IN query per kind and request (naiveFeed), or primed
    (memoryFeed)."""

    def __init__(
        self, sessions: async_sessionmaker | None, viewer_id: int | None, media: Media | None
    ) -> None:
        self.sessions = sessions
        self.viewer_id = viewer_id
        self.media = media
        self.user_by_id: DataLoader[int, models.User | None] = DataLoader(self._users)
        self.viewer_liked_post: DataLoader[int, bool] = DataLoader(self._liked)
        self.viewer_follows_user: DataLoader[int, bool] = DataLoader(self._follows)
        self.post_media: DataLoader[tuple[int, str], list[MediaView]] = DataLoader(self._post_media)

    async def rows(self, query: Any) -> list[Any]:
        if self.sessions is None:
            raise RuntimeError("DATABASE_URL is not set: only memoryFeed works")
        async with self.sessions() as session:
            return list(await session.scalars(query))

    async def _users(self, ids: Sequence[int]) -> list[models.User | None]:
        found = {
            u.id: u for u in await self.rows(select(models.User).where(models.User.id.in_(ids)))
        }
        return [found.get(i) for i in ids]

    async def _liked(self, post_ids: Sequence[int]) -> list[bool]:
        query = select(models.Like.post_id).where(
            models.Like.user_id == self.viewer_id, models.Like.post_id.in_(post_ids)
        )
        found = set(await self.rows(query))
        return [p in found for p in post_ids]

    async def _post_media(self, keys: Sequence[tuple[int, str]]) -> list[list[MediaView]]:
        if self.sessions is None or self.media is None:
            return [[] for _ in keys]
        query = (
            select(
                models.PostMedia.post_id,
                models.PostMedia.alt,
                models.MediaObject.key,
                models.MediaObject.content_type,
                models.MediaObject.width,
                models.MediaObject.height,
            )
            .join(models.MediaObject, models.MediaObject.key == models.PostMedia.media_key)
            .where(models.PostMedia.post_id.in_([post_id for post_id, _ in keys]))
            .order_by(models.PostMedia.post_id, models.PostMedia.position)
        )
        async with self.sessions() as session:
            rows = (await session.execute(query)).all()
        urls = MediaUrls(self.media.store, self.media.policy)
        visibility = dict(keys)
        found: dict[int, list[MediaView]] = {post_id: [] for post_id, _ in keys}
        for post_id, alt, key, content_type, width, height in rows:
            url = await urls.url(key, content_type, visibility[post_id])
            found[post_id].append(MediaView(url, width, height, content_type, alt))
        return [found[post_id] for post_id, _ in keys]

    async def _follows(self, user_ids: Sequence[int]) -> list[bool]:
        query = select(models.Follow.followee_id).where(
            models.Follow.follower_id == self.viewer_id, models.Follow.followee_id.in_(user_ids)
        )
        found = set(await self.rows(query))
        return [u in found for u in user_ids]


@dataclass
class StockContext:
    viewer_id: int | None
    auth_error: AppError | None
    sessions: async_sessionmaker | None
    media: Media | None = None
    loaders: Loaders = field(init=False)

    def __post_init__(self) -> None:
        self.loaders = Loaders(self.sessions, self.viewer_id, self.media)

    def require_viewer(self) -> int:
        if self.auth_error is not None:
            raise self.auth_error
        if self.viewer_id is None:
            raise Unauthenticated("Log in first: send 'Authorization: Bearer <token>'.")
        return self.viewer_id


def _size(first: int | None) -> int:
    if first is None:
        return 20
    if not 1 <= first <= PAGE_MAX:
        raise BadInput(f"'first' must be between 1 and {PAGE_MAX}.")
    return first


def _connection(edges: list[PostEdge], has_next: bool) -> FeedConnection:
    return FeedConnection(
        edges=edges,
        page_info=PageInfo(
            has_next_page=has_next,
            has_previous_page=False,
            start_cursor=edges[0].cursor if edges else None,
            end_cursor=edges[-1].cursor if edges else None,
        ),
        session_id=None,
        degraded=False,
    )


_MEMORY = memory_page()


@strawberry.type
class StockQuery:
    @strawberry.field(description="Baseline: the same page from memory, no I/O.")
    def memory_feed(self, info: Info[StockContext, None], first: int | None = 20) -> FeedConnection:
        info.context.require_viewer()
        size = _size(first)
        page = _MEMORY.posts[:size]
        loaders = info.context.loaders
        for post in page:
            loaders.user_by_id.prime(post.author_id, _MEMORY.users[post.author_id])
            loaders.viewer_liked_post.prime(post.id, post.id in _MEMORY.liked)
            loaders.post_media.prime((post.id, post.visibility), [])
        edges = [
            PostEdge(cursor=c, node=Post(row=p))
            for p, c in zip(page, _MEMORY.cursors, strict=False)
        ]
        return _connection(edges, len(_MEMORY.posts) > size)

    @strawberry.field(description="Baseline: followees' newest posts by one join per request.")
    async def naive_feed(
        self, info: Info[StockContext, None], first: int | None = 20
    ) -> FeedConnection:
        """Visibility as the brief states it: not deleted, not private unless the viewer's own
        (a join on follows never yields the viewer's own posts, so: not private). Blocks are
        not checked: the textbook query does not, and the bulk seed has none."""
        ctx = info.context
        viewer_id = ctx.require_viewer()
        size = _size(first)
        query = (
            select(models.Post)
            .join(models.Follow, models.Follow.followee_id == models.Post.author_id)
            .where(
                models.Follow.follower_id == viewer_id,
                models.Post.deleted_at.is_(None),
                models.Post.visibility != "private",
            )
            .order_by(models.Post.created_at.desc(), models.Post.id.desc())
            .limit(size + 1)
        )
        rows = await ctx.loaders.rows(query)
        posts, has_next = rows[:size], len(rows) > size
        edges = [
            PostEdge(cursor=keyset.encode(p.created_at, p.id), node=Post(row=p)) for p in posts
        ]
        return _connection(edges, has_next)


# Factories, as in app/api/endpoint/schema.py: a fresh extension per request over module-level LRUs.
schema = strawberry.Schema(
    query=StockQuery,
    extensions=[lambda: ParserCache(maxsize=256), lambda: ValidationCache(maxsize=256)],
)


class StockGraphQL(GraphQL):
    def __init__(self, settings: Settings, sessions: async_sessionmaker | None) -> None:
        super().__init__(schema, graphql_ide=None)
        self.settings = settings
        self.sessions = sessions
        self.media = Media(make_store(settings), UrlPolicy.of(settings))

    async def get_context(self, request: Request | WebSocket, response: Any) -> StockContext:  # type: ignore[override]
        try:
            viewer_id = user_id_from_header(self.settings, request.headers.get("authorization"))
        except AppError as exc:
            return StockContext(None, exc, self.sessions, self.media)
        return StockContext(viewer_id, None, self.sessions, self.media)


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings()
    sessions = (
        async_sessionmaker(make_engine(settings), expire_on_commit=False)
        if settings.database_url
        else None
    )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    graphql = StockGraphQL(settings, sessions)
    return Starlette(
        routes=[Route("/graphql", graphql, methods=["POST"]), Route("/healthz", healthz)]
    )


app = create_app()
