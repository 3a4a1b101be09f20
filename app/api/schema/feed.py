"""The `feed` query: argument checks and mapping FeedService pages to the connection type."""

from __future__ import annotations

import time
from typing import Any, cast

import strawberry
from prometheus_client import Histogram
from strawberry.types import Info

from app.api.schema.context import Context
from app.api.schema.resolvers import check_first
from app.api.schema.types import FeedConnection, FeedMode, Post, PostEdge, page_info
from app.feed import modes
from app.feed.cursor import CursorCodec, fingerprint
from app.observability.metrics import FEED_LATENCY

_LATENCY: dict[tuple[str, str], Histogram] = {}


def _latency(mode: str, page: str) -> Histogram:
    """The feed_request_seconds child: labels() takes a lock and builds a key, so once each."""
    metric = _LATENCY.get((mode, page))
    if metric is None:
        metric = _LATENCY[mode, page] = FEED_LATENCY.labels(mode, page)
    return metric


async def resolve_feed(
    info: Info[Context, None], first: int | None, after: str | None, mode: FeedMode | None
) -> FeedConnection:
    connection = await feed_connection(info.context, first, after, mode)
    info.context.loaders.prime_page([e.node.row for e in connection.edges], connection.extras)
    return connection


async def feed_connection(
    ctx: Context, first: int | None, after: str | None, mode: FeedMode | None
) -> FeedConnection:
    """The `feed` field's value, for the resolver above and for compiled documents
    (app.api.fast.compiler), which read the page's authors and likes from `extras`."""
    start = time.perf_counter()
    viewer_id = ctx.require_viewer()
    size = check_first(first)
    feed_mode = modes.FeedMode((mode or FeedMode.RANKED).value)
    codec = CursorCodec(ctx.state.settings.secret_key)
    fp = fingerprint(viewer_id, feed_mode)
    try:
        cursor = codec.decode(after, fp) if after else None
        # Without a cursor this is a fresh first page, with what that implies (FeedService).
        page = await ctx.state.feed.page(viewer_id, feed_mode, size, cursor)
        edges = [
            PostEdge(cursor=codec.encode(position, fp), node=Post(row=post))
            for (_, position), post in zip(page.rows, page.posts, strict=True)
        ]
        return FeedConnection(
            edges=edges,
            page_info=page_info(edges, page.has_next, after is not None),
            session_id=strawberry.ID(page.session_id) if page.session_id else None,
            degraded=page.degraded,
            extras=page.extras,
        )
    finally:
        # Failed reads count too (a timed-out read is latency the operator must see); a
        # request refused above (not logged in, bad `first`) reached no read and is not timed.
        _latency(feed_mode, "next" if after else "first").observe(time.perf_counter() - start)


async def complete_page_extras(ctx: Context, connection: FeedConnection) -> None:
    """Authors and likes a page did not read with its rows come from the loaders, for the
    fields a compiled document answers from `extras` (app.api.schema.types, PAGE_EXTRAS)."""
    extras = connection.extras
    posts = [edge.node.row for edge in connection.edges]
    authors = [p.author_id for p in posts if p.author_id not in extras.authors]
    if authors:
        rows = await ctx.loaders.user_by_id.load_many(authors)
        # A users row has every attribute the User type reads, as a FeedAuthor does.
        found = {a: cast(Any, r) for a, r in zip(authors, rows, strict=True) if r is not None}
        extras.authors.update(found)
    unknown = [p.id for p in posts if p.id not in extras.covered]
    if unknown:
        liked = await ctx.loaders.viewer_liked_post.load_many(unknown)
        extras.covered.update(unknown)
        extras.liked.update(p for p, yes in zip(unknown, liked, strict=True) if yes)
