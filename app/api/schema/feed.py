"""The `feed` query: argument checks and mapping FeedService pages to the connection type."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import strawberry
from prometheus_client import Histogram
from strawberry.types import Info

from app.api.schema.context import Context
from app.api.schema.resolvers import check_first
from app.api.schema.types import (
    _VISIBILITIES,
    FanoutMode,
    FeedConnection,
    FeedMode,
    FeedReason,
    PageInfo,
    Post,
    PostEdge,
    Recommendation,
    User,
    Visibility,
    page_info,
)
from app.db.models import FANOUT_PULL
from app.feed import modes
from app.feed.cursor import CursorCodec, fingerprint
from app.feed.page import FeedPage
from app.feed.recommended import Why
from app.feed.rows import FeedRow, PageExtras
from app.media.hydrate import MediaView, page_media
from app.media.urls import MediaUrls, UrlPolicy
from app.observability.metrics import FEED_LATENCY

T = TypeVar("T")
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
    why = any(_selects_why(field) for field in info.selected_fields)
    connection = await feed_connection(info.context, first, after, mode, why)
    info.context.loaders.prime_page([e.node.row for e in connection.edges], connection.extras)
    return connection


def _selects_why(selection: Any) -> bool:
    """Whether a selection (Strawberry's selected_fields: fields, fragments) asks for
    `PostEdge.recommendation` anywhere below it: only then is the why read."""
    for inner in getattr(selection, "selections", None) or ():
        if getattr(inner, "name", None) == "recommendation" or _selects_why(inner):
            return True
    return False


async def feed_connection(
    ctx: Context,
    first: int | None,
    after: str | None,
    mode: FeedMode | None,
    why: bool = False,
) -> FeedConnection:
    """The `feed` field's value, for the resolver above and for compiled documents
    (app.api.fast.compiler), which read the page's authors and likes from `extras`. `why`:
    the document selects `recommendation` (its why costs a query)."""
    return await _read_page(ctx, first, after, mode, _connection, why)


async def feed_rows(
    ctx: Context,
    first: int | None,
    after: str | None,
    mode: FeedMode | None,
    why: bool = False,
) -> FeedRows:
    """The `feed` field's value for plans that render straight from the page's rows
    (app.api.fast.compiler, ROW_READS below): the same page, reads, checks, errors and
    timing as `feed_connection`, without a PostEdge, Post or FeedPost per post."""
    return await _read_page(ctx, first, after, mode, _rows, why)


async def _read_page(
    ctx: Context,
    first: int | None,
    after: str | None,
    mode: FeedMode | None,
    build: Callable[[FeedPage, CursorCodec, str, bool, int], T],
    why: bool = False,
) -> T:
    start = time.perf_counter()
    viewer_id = ctx.require_viewer()
    size = check_first(first)
    feed_mode = modes.FeedMode((mode or FeedMode.RANKED).value)
    codec = CursorCodec(ctx.state.settings.secret_key)
    fp = fingerprint(viewer_id, feed_mode)
    try:
        cursor = codec.decode(after, fp) if after else None
        # Without a cursor this is a fresh first page, with what that implies (FeedService).
        page = await ctx.state.feed.page(viewer_id, feed_mode, size, cursor, why)
        if page.degraded:  # PostgreSQL may be away: its images from what the process knows
            await _degraded_media(ctx, page)
        return build(page, codec, fp, after is not None, viewer_id)
    finally:
        # Failed reads count too (a timed-out read is latency the operator must see); a
        # request refused above (not logged in, bad `first`) reached no read and is not timed.
        _latency(feed_mode, "next" if after else "first").observe(time.perf_counter() - start)


async def _degraded_media(ctx: Context, page: FeedPage) -> None:
    """A degraded page's images in its extras before either path renders it (PAGE_EXTRAS),
    read with the outage tolerated: a post whose images are not known shows none."""
    state = ctx.state
    urls = MediaUrls(state.media_store, UrlPolicy.of(state.settings))
    posts = [(row.post_id, row.visibility) for row, _ in page.rows]
    page.extras.media.update(await page_media(state.feed.reads.all, urls, posts, degraded=True))


_FOLLOWED, _RECOMMENDED, _OWN = FeedReason.FOLLOWED, FeedReason.RECOMMENDED, FeedReason.OWN
_NO_WHY = Why(0)  # a recommendation whose why could not be read (PostgreSQL away)


def _reason(row: FeedRow, page: FeedPage, viewer_id: int) -> tuple[FeedReason, Why | None]:
    """An edge's reason and, for a recommendation, its why (app.feed.recommended)."""
    if row.author_id == viewer_id:
        return _OWN, None
    if row.post_id in page.recommended:
        return _RECOMMENDED, page.why.get(row.post_id, _NO_WHY)
    return _FOLLOWED, None


def _recommendation(why: Why | None) -> Recommendation | None:
    if why is None:
        return None
    return Recommendation(
        text=why.text, liked_by=[User(row=a) for a in why.liked_by], liked_by_count=why.count
    )


def _connection(
    page: FeedPage, codec: CursorCodec, fp: str, has_previous: bool, viewer_id: int
) -> FeedConnection:
    edges = []
    for (row, position), post in zip(page.rows, page.posts, strict=True):
        reason, why = _reason(row, page, viewer_id)
        edges.append(
            PostEdge(
                cursor=codec.encode(position, fp),
                node=Post(row=post),
                reason=reason,
                recommendation=_recommendation(why),
            )
        )
    return FeedConnection(
        edges=edges,
        page_info=page_info(edges, page.has_next, has_previous),
        session_id=strawberry.ID(page.session_id) if page.session_id else None,
        degraded=page.degraded,
        extras=page.extras,
    )


def _rows(
    page: FeedPage, codec: CursorCodec, fp: str, has_previous: bool, viewer_id: int
) -> FeedRows:
    encode = codec.encode
    if page.recommended:
        edges = [
            (encode(position, fp), row, *_reason(row, page, viewer_id))
            for row, position in page.rows
        ]
    else:  # no recommendation in the session: the reason is the author's
        edges = [
            (
                encode(position, fp),
                row,
                _OWN if row.author_id == viewer_id else _FOLLOWED,
                None,
            )
            for row, position in page.rows
        ]
    return FeedRows(
        edges=edges,
        page_info=PageInfo(
            has_next_page=page.has_next,
            has_previous_page=has_previous,
            start_cursor=edges[0][0] if edges else None,
            end_cursor=edges[-1][0] if edges else None,
        ),
        session_id=strawberry.ID(page.session_id) if page.session_id else None,
        degraded=page.degraded,
        extras=page.extras,
    )


@dataclass(slots=True)
class FeedRows:
    """A FeedConnection's fields with each edge as (cursor, FeedRow, reason, why): what a row
    plan renders."""

    edges: list[tuple[str, FeedRow, FeedReason, Why | None]]
    page_info: PageInfo
    session_id: str | None
    degraded: bool
    extras: PageExtras


@dataclass(frozen=True, slots=True)
class RowRead:
    """How a row plan reads one field (by the type's Python attribute name) from what stands
    in for the object the regular path builds: `source` an attribute name (`convert` applied
    to it, if given), an item index (an edge pair), or `read(source, extras)` for a field
    answered from the page's extras (None: the page did not hold it, as PAGE_EXTRAS reads)."""

    source: str | int | Callable[[Any, PageExtras], Any]
    convert: Callable[[Any], Any] | None = None


def _visibility(value: str) -> Visibility:
    found = _VISIBILITIES.get(value)
    return Visibility(value) if found is None else found  # as Post.__init__


def _fanout(value: int) -> FanoutMode:
    return FanoutMode.PULL if value == FANOUT_PULL else FanoutMode.PUSH  # as User.__init__


def _author_row(row: FeedRow, extras: PageExtras) -> Any:
    return extras.authors.get(row.author_id)  # a FeedAuthor, or a users row the loader read


def _liked_row(row: FeedRow, extras: PageExtras) -> bool | None:
    post_id = row.post_id
    return post_id in extras.liked if post_id in extras.covered else None


def _media_rows(row: FeedRow, extras: PageExtras) -> list[MediaView] | None:
    return extras.media.get(row.post_id)  # each MediaView has the Media type's attributes


# GraphQL type name -> Python attribute -> how a row plan reads it, each the value the object
# the regular path builds holds (FeedConnection, PageInfo: FeedRows and the PageInfo itself;
# PostEdge: the (cursor, row, reason, why) tuple; Recommendation: the Why; Post:
# Post.__init__ over a FeedRow; User: User.__init__ over a FeedAuthor or users row, never
# graph-hidden on a feed page (a recommendation's likers are never across a block from the
# viewer: app.feed.recommended); Post.author and
# Post.viewerHasLiked, Post.media: types.py's PAGE_EXTRAS reads; Media: the MediaView a
# Media object is made from). A plan selecting anything not listed
# renders from objects instead. tests/api/fast/test_compiled_render.py holds the two renders
# equal for every registered feed plan; tests/api/fast/test_compiled_documents.py compares
# random documents with the regular path.
ROW_READS: dict[str, dict[str, RowRead]] = {
    "FeedConnection": {
        name: RowRead(name) for name in ("edges", "page_info", "session_id", "degraded")
    },
    "PageInfo": {
        name: RowRead(name)
        for name in ("has_next_page", "has_previous_page", "start_cursor", "end_cursor")
    },
    "PostEdge": {
        "cursor": RowRead(0),
        "node": RowRead(1),
        "reason": RowRead(2),
        "recommendation": RowRead(3),
    },
    "Recommendation": {
        "text": RowRead("text"),
        "liked_by": RowRead("liked_by"),
        "liked_by_count": RowRead("count"),
    },
    "Post": {
        "id": RowRead("post_id", str),
        "body": RowRead("body"),
        "visibility": RowRead("visibility", _visibility),
        "created_at": RowRead("created_at"),
        "edited_at": RowRead("edited_at"),
        "like_count": RowRead("likes"),
        "comment_count": RowRead("comments"),
        "author": RowRead(_author_row),
        "viewer_has_liked": RowRead(_liked_row),
        "media": RowRead(_media_rows),
    },
    "Media": {name: RowRead(name) for name in ("url", "width", "height", "content_type", "alt")},
    "User": {
        "id": RowRead("id", str),
        "handle": RowRead("handle"),
        "display_name": RowRead("display_name"),
        "follower_count": RowRead("follower_count"),
        "following_count": RowRead("following_count"),
        "fanout_mode": RowRead("fanout_mode", _fanout),
    },
}


async def complete_page_extras(ctx: Context, connection: FeedConnection) -> None:
    """Authors and likes a page did not read with its rows come from the loaders, for the
    fields a compiled document answers from `extras` (app.api.schema.types, PAGE_EXTRAS)."""
    posts = [edge.node.row for edge in connection.edges]
    await _complete(ctx, connection.extras, [(p.id, p.author_id, p.visibility) for p in posts])


async def complete_row_extras(ctx: Context, page: FeedRows) -> None:
    """`complete_page_extras` for a row plan's FeedRows."""
    rows = [edge[1] for edge in page.edges]
    await _complete(ctx, page.extras, [(r.post_id, r.author_id, r.visibility) for r in rows])


async def complete_page_extras_with_media(ctx: Context, connection: FeedConnection) -> None:
    """`complete_page_extras`, and the page's media (a document selecting Post.media)."""
    posts = [edge.node.row for edge in connection.edges]
    keys = [(p.id, p.author_id, p.visibility) for p in posts]
    await _complete(ctx, connection.extras, keys, media=True)


async def complete_row_extras_with_media(ctx: Context, page: FeedRows) -> None:
    """`complete_row_extras`, and the page's media (a document selecting Post.media)."""
    rows = [edge[1] for edge in page.edges]
    keys = [(r.post_id, r.author_id, r.visibility) for r in rows]
    await _complete(ctx, page.extras, keys, media=True)


async def _complete(
    ctx: Context, extras: PageExtras, posts: list[tuple[int, int, str]], media: bool = False
) -> None:
    authors = [a for _, a, _ in posts if a not in extras.authors]
    if authors:
        rows = await ctx.loaders.user_by_id.load_many(authors)
        # A users row has every attribute the User type reads, as a FeedAuthor does.
        found = {a: cast(Any, r) for a, r in zip(authors, rows, strict=True) if r is not None}
        extras.authors.update(found)
    unknown = [p for p, _, _ in posts if p not in extras.covered]
    if unknown:
        liked = await ctx.loaders.viewer_liked_post.load_many(unknown)
        extras.covered.update(unknown)
        extras.liked.update(p for p, yes in zip(unknown, liked, strict=True) if yes)
    if media:
        # The regular path's Post.media loader: one query for the page (post_media's primary
        # key), the URLs minted for this viewer by the same code (app.media.hydrate).
        wanted = [(p, visibility) for p, _, visibility in posts if p not in extras.media]
        if wanted:
            views = await ctx.loaders.post_media.load_many(wanted)
            extras.media.update((p, v) for (p, _), v in zip(wanted, views, strict=True))
