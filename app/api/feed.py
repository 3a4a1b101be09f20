"""The `feed` query: argument checks and mapping FeedService pages to the connection type."""

from __future__ import annotations

import contextlib
import time

import strawberry
from prometheus_client import Histogram
from redis.exceptions import RedisError
from strawberry.types import Info

from app.api.context import Context
from app.api.resolvers import check_first
from app.api.types import FeedConnection, FeedMode, PageInfo, Post, PostEdge
from app.feed.cursor import CursorCodec, fingerprint
from app.observability.metrics import FEED_LATENCY
from app.realtime.counts import reset_new_post_count
from app.users import activity

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
    start = time.perf_counter()
    ctx = info.context
    viewer_id = ctx.require_viewer()
    size = check_first(first)
    mode_name = (mode or FeedMode.RANKED).value
    codec = CursorCodec(ctx.state.settings.secret_key)
    fp = fingerprint(viewer_id, mode_name)
    try:
        cursor = codec.decode(after, fp) if after else None
        if cursor is None:
            await activity.touch(ctx.state, viewer_id)
        page = await ctx.state.feed.page(viewer_id, mode_name, size, cursor)
        if after is None:
            # A fresh first page shows everything announced so far: the live count restarts.
            with contextlib.suppress(RedisError):  # Redis down: the page matters more
                await reset_new_post_count(ctx.state.redis, viewer_id)
        ctx.loaders.prime_page(page.posts, page.extras)
        edges = [
            PostEdge(cursor=codec.encode(position, fp), node=Post(row=post))
            for (_, position), post in zip(page.rows, page.posts, strict=True)
        ]
        return FeedConnection(
            edges=edges,
            page_info=PageInfo(
                has_next_page=page.has_next,
                has_previous_page=after is not None,
                start_cursor=edges[0].cursor if edges else None,
                end_cursor=edges[-1].cursor if edges else None,
            ),
            session_id=strawberry.ID(page.session_id) if page.session_id else None,
            degraded=page.degraded,
        )
    finally:
        # Failed reads count too (a timed-out read is latency the operator must see); a
        # request refused above (not logged in, bad `first`) reached no read and is not timed.
        _latency(mode_name, "next" if after else "first").observe(time.perf_counter() - start)
