"""Benchmark-only GraphQL schema at /bench/graphql: the baselines the real `feed` is judged by.

Mounted only when BENCHMARK_ENDPOINTS=1 (Settings.benchmark_endpoints), and as a separate
schema, so the public SDL (graphql/schema.graphql) never shows these fields. Both fields
return the same FeedConnection/PostEdge/Post types as `feed`, resolve authors and likes
through the same per-request DataLoaders, and run under the same auth, error policy and
schema extensions (parser/validation caches, depth/alias/token limits) as /graphql, so the
benchmark compares read paths, not two different GraphQL set-ups:

- `naiveFeed`: the textbook query, "join follows with posts, order by created_at desc,
  limit N", straight against Postgres on every request (no Redis, no ranking, no session).
- `memoryFeed`: the same page shape built from Python objects held in memory (no I/O at
  all): what GraphQL over HTTP costs by itself, the ceiling the real feed is measured
  against (issue 4, "Targets").
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import strawberry
from sqlalchemy import select
from starlette.routing import Route
from starlette.types import ASGIApp
from strawberry.types import Info

from app.api.context import Context
from app.api.resolvers import check_first
from app.api.schema import FeedSchema
from app.api.types import FeedConnection, PageInfo, Post, PostEdge
from app.db import models
from app.db.models import FANOUT_PULL, FANOUT_PUSH
from app.feed.cursor import CursorCodec, SessionPosition
from app.posts import keyset

if TYPE_CHECKING:
    from app.state import AppState
    from app.web import FeedGraphQL

MEMORY_POSTS = 100  # the largest page `first` allows
MEMORY_AUTHORS = 25


def _memory_rows() -> tuple[list[models.Post], dict[int, models.User], set[int], list[str]]:
    """A fixed, realistic-looking page: 100 posts by 25 authors, some liked by the viewer.

    Built once per process. Cursors are precomputed: signing them is feed machinery, not
    GraphQL.
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
    # Real signed session cursors, made once: the same bytes on the wire as `feed` sends.
    codec = CursorCodec("memory-feed")
    cursors = [
        codec.encode(SessionPosition("MemoryPage01", n + 1), "0" * 12) for n in range(MEMORY_POSTS)
    ]
    return posts, users, liked, cursors


_MEMORY = _memory_rows()


async def naive_feed(info: Info[Context, None], first: int | None) -> FeedConnection:
    """Followees' newest posts by one join, sorted in Postgres on every request.

    Visibility as the brief states it: not deleted, not private unless the viewer's own (a
    join on follows never yields the viewer's own posts, so: not private). Blocks are not
    checked: the textbook query does not, and the bulk seed has none.
    """
    ctx = info.context
    viewer_id = ctx.require_viewer()
    size = check_first(first)
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
    async with ctx.state.sessions() as session:
        rows = list(await session.scalars(query))
    posts, has_next = rows[:size], len(rows) > size
    ctx.loaders.prime_posts(posts)
    edges = [PostEdge(cursor=keyset.encode(p.created_at, p.id), node=Post(row=p)) for p in posts]
    return _connection(edges, has_next)


async def memory_feed(info: Info[Context, None], first: int | None) -> FeedConnection:
    """The same page from memory: the loaders are primed, so nothing below does I/O."""
    ctx = info.context
    ctx.require_viewer()
    size = check_first(first)
    posts, users, liked, cursors = _MEMORY
    page = posts[:size]
    loaders = ctx.loaders
    loaders.prime_posts(page)
    for post in page:
        loaders.user_by_id.prime(post.author_id, users[post.author_id])
        loaders.viewer_liked_post.prime(post.id, post.id in liked)
    edges = [PostEdge(cursor=c, node=Post(row=p)) for p, c in zip(page, cursors, strict=False)]
    return _connection(edges, len(posts) > size)


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


@strawberry.type
class BenchQuery:
    @strawberry.field(description="Benchmark baseline: one follows-posts join per request.")
    async def naive_feed(self, info: Info[Context, None], first: int | None = 20) -> FeedConnection:
        return await naive_feed(info, first)

    @strawberry.field(description="Benchmark ceiling: the same page from memory, no I/O.")
    async def memory_feed(
        self, info: Info[Context, None], first: int | None = 20
    ) -> FeedConnection:
        return await memory_feed(info, first)


def bench_schema(base: FeedSchema) -> FeedSchema:
    """BenchQuery under the public schema's extensions, executor and config (same costs)."""
    return FeedSchema(
        query=BenchQuery,
        extensions=list(base.extensions),
        execution_context_class=base.execution_context_class,
        config=base.config,
    )


def bench_route(
    view_class: type[FeedGraphQL],
    state_getter: Callable[[], AppState],
    wrap: Callable[[ASGIApp], ASGIApp],
) -> Route:
    """POST /bench/graphql: the app's own GraphQL view (context, auth, orjson) on BenchQuery.

    `wrap` applies the same ASGI layers as /graphql (body limit, latency histogram).
    """
    view = view_class(state_getter)
    view.schema = bench_schema(view.schema)  # type: ignore[arg-type]
    return Route("/bench/graphql", wrap(view), methods=["POST"])
