"""GraphQL object types (API.md). Rows come from domain services; nothing here queries SQL."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Sequence
from datetime import datetime
from enum import Enum
from typing import Protocol, TypeVar

import strawberry
from strawberry.dataloader import DataLoader
from strawberry.types import Info

from app.api.schema import resolvers
from app.db import models
from app.db.models import FANOUT_PULL
from app.feed import modes
from app.feed.rows import FeedAuthor, FeedPost, PageExtras
from app.media.hydrate import MediaView
from app.posts import keyset

V = TypeVar("V")

# A resolver field's metadata key: how a compiled feed document (app.api.fast.compiler)
# answers the field from the page's `extras` (PageExtras, read with the page's rows) instead
# of calling its resolver. The value is `read(parent, extras)`, returning the field's value
# (an object type's instance, or a leaf's Python value), or None when the page did not hold
# it (the compiled request then falls back to the regular path). app.api.schema.feed's
# complete_page_extras fills in what a page lacks before a compiled document renders it
# (Post.media: only for a document that selects it, its one query).
PAGE_EXTRAS = "feed.page_extras"


# The GraphQL enums carry the domain enums' values, so `models.Visibility(v.value)` and
# `modes.FeedMode(m.value)` map one onto the other.


@strawberry.enum
class Visibility(Enum):
    PUBLIC = models.Visibility.PUBLIC.value
    FOLLOWERS = models.Visibility.FOLLOWERS.value
    PRIVATE = models.Visibility.PRIVATE.value


# A row's visibility string -> its member, without the Enum call's lookup machinery (a page
# builds one Post per row); any other value goes through `Visibility(...)`, which refuses it.
_VISIBILITIES = {member.value: member for member in Visibility}


@strawberry.enum
class FeedMode(Enum):
    RANKED = modes.FeedMode.RANKED.value
    CHRONOLOGICAL = modes.FeedMode.CHRONOLOGICAL.value


@strawberry.enum(description="Why a post is in the viewer's feed.")
class FeedReason(Enum):
    FOLLOWED = "followed"  # by an author the viewer follows
    RECOMMENDED = "recommended"  # from the recommendation source (RANKED only)
    OWN = "own"  # the viewer's own post


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


def _now_or_later(loader: DataLoader[int, V], key: int) -> V | Awaitable[V]:
    """The loader's value itself when it is already known (primed, or loaded earlier in this
    request), else the awaitable `load`.

    graphql-core completes plain values synchronously; an awaitable per field makes it gather
    the list's items as tasks. A feed page primes its authors and likes, so a 20-post page
    then resolves these fields without ~40 coroutines and a gather.
    """
    future = loader.cache_map.get(key)
    if (
        future is not None
        and future.done()
        and not future.cancelled()
        and future.exception() is None
    ):
        return future.result()
    return loader.load(key)


async def _user_recommendations_enabled(root: User, info: Info) -> bool | None:
    if root.row.id != info.context.viewer_id:
        return None  # the viewer's own setting only
    enabled = getattr(root.row, "recommendations_enabled", None)
    if enabled is None:  # a feed page's author row: the users row has it
        row = await info.context.loaders.user_by_id.load(root.row.id)
        enabled = getattr(row, "recommendations_enabled", True)
    return bool(enabled)


def _user_viewer_follows(root: User, info: Info) -> bool | Awaitable[bool]:
    return _now_or_later(info.context.loaders.viewer_follows_user, root.row.id)


def _user_viewer_mutes(root: User, info: Info) -> bool | Awaitable[bool]:
    return _now_or_later(info.context.loaders.viewer_mutes_user, root.row.id)


async def _user_muted_users(root: User, info: Info, first: int | None = 20) -> list[User] | None:
    rows = await resolvers.muted_users(info.context, root.row.id, first)
    return None if rows is None else [User(row=row) for row in rows]


async def _user_posts(
    root: User, info: Info, first: int | None = 20, after: str | None = None
) -> PostConnection:
    page = await resolvers.user_posts(info.context, root.row.id, first, after)
    return post_connection(*page)


async def _user_followers(
    root: User, info: Info, first: int | None = 20, after: str | None = None
) -> UserConnection:
    page = await resolvers.follow_list(info.context, root.row.id, "followers", first, after)
    return user_connection(*page)


async def _user_following(
    root: User, info: Info, first: int | None = 20, after: str | None = None
) -> UserConnection:
    page = await resolvers.follow_list(info.context, root.row.id, "following", first, after)
    return user_connection(*page)


@strawberry.type
class User:
    """Scalar fields are plain attributes set from the row: Strawberry resolves attribute
    fields with a getattr, while a method field costs an Info object, argument parsing and an
    extension chain per field per object (most of executing a feed page's Post/User part)."""

    row: strawberry.Private[models.User | FeedAuthor]
    id: strawberry.ID
    handle: str
    display_name: str
    follower_count: int
    following_count: int
    fanout_mode: FanoutMode
    # The resolvers below may return an awaitable, which graphql-core resolves: typed so.
    viewer_follows: bool = strawberry.field(  # type: ignore[assignment]
        resolver=_user_viewer_follows, graphql_type=bool, init=False
    )
    viewer_mutes: bool = strawberry.field(  # type: ignore[assignment]
        resolver=_user_viewer_mutes,
        graphql_type=bool,
        init=False,
        description="The viewer muted this user (false without a token).",
    )
    muted_users: list[User] | None = strawberry.field(
        resolver=_user_muted_users,
        init=False,
        description="Whom this user mutes, most recent first (at most `first`, 1..100): "
        "the viewer's own list only, null for anyone else.",
    )
    posts: PostConnection = strawberry.field(resolver=_user_posts, init=False)
    followers: UserConnection = strawberry.field(
        resolver=_user_followers, init=False, description="Who follows this user, newest first."
    )
    following: UserConnection = strawberry.field(
        resolver=_user_following, init=False, description="Whom this user follows, newest first."
    )
    recommendations_enabled: bool | None = strawberry.field(
        resolver=_user_recommendations_enabled,
        init=False,
        description="Whether the viewer's RANKED feed carries recommendations "
        "(setRecommendations); null for any other user.",
    )

    def __init__(self, row: models.User | FeedAuthor, graph_hidden: bool = False) -> None:
        """`graph_hidden`: the user is across a block from the viewer, who sees none of their
        graph (app.api.schema.social.profile; decision 0018)."""
        self.row = row
        self.id = strawberry.ID(str(row.id))
        self.handle = row.handle
        self.display_name = row.display_name
        self.follower_count = 0 if graph_hidden else row.follower_count
        self.following_count = 0 if graph_hidden else row.following_count
        self.fanout_mode = FanoutMode.PULL if row.fanout_mode == FANOUT_PULL else FanoutMode.PUSH


def _post_author(root: Post, info: Info) -> User | Awaitable[User]:
    found = _now_or_later(info.context.loaders.user_by_id, root.row.author_id)
    if inspect.isawaitable(found):
        return _awaited_author(found)
    assert found is not None  # posts.author_id is a foreign key
    return User(row=found)


async def _awaited_author(found: Awaitable[models.User | FeedAuthor | None]) -> User:
    author = await found
    assert author is not None  # posts.author_id is a foreign key
    return User(row=author)


def _post_author_in(post: Post, extras: PageExtras) -> User | None:
    author = extras.authors.get(post.row.author_id)
    return None if author is None else User(row=author)


def _post_viewer_has_liked(root: Post, info: Info) -> bool | Awaitable[bool]:
    return _now_or_later(info.context.loaders.viewer_liked_post, root.row.id)


def _post_liked_in(post: Post, extras: PageExtras) -> bool | None:
    return post.row.id in extras.liked if post.row.id in extras.covered else None


def _post_media_in(post: Post, extras: PageExtras) -> list[Media] | None:
    views = extras.media.get(post.row.id)
    return None if views is None else [Media(view=view) for view in views]


async def _post_media(root: Post, info: Info) -> list[Media]:
    views = await info.context.loaders.post_media.load((root.row.id, root.row.visibility))
    return [Media(view=view) for view in views]


async def _post_comments(
    root: Post, info: Info, first: int | None = 20, after: str | None = None
) -> CommentConnection:
    rows, has_next, has_previous = await resolvers.post_comments(
        info.context, root.row.id, first, after
    )
    edges = [
        CommentEdge(cursor=keyset.encode(c.created_at, c.id), node=Comment(row=c)) for c in rows
    ]
    return CommentConnection(edges=edges, page_info=page_info(edges, has_next, has_previous))


@strawberry.type
class Post:
    """Attribute fields set from the row, like User (see there for why)."""

    row: strawberry.Private[models.Post | FeedPost]
    id: strawberry.ID
    author: User = strawberry.field(  # type: ignore[assignment]  # may be awaitable, as above
        resolver=_post_author,
        graphql_type=User,
        init=False,
        metadata={PAGE_EXTRAS: _post_author_in},
    )
    body: str
    visibility: Visibility
    created_at: datetime
    edited_at: datetime | None
    like_count: int
    comment_count: int
    viewer_has_liked: bool = strawberry.field(  # type: ignore[assignment]
        resolver=_post_viewer_has_liked,
        graphql_type=bool,
        init=False,
        metadata={PAGE_EXTRAS: _post_liked_in},
    )
    comments: CommentConnection = strawberry.field(
        resolver=_post_comments, init=False, description="The post's comments, oldest first."
    )
    media: list[Media] = strawberry.field(
        resolver=_post_media,
        init=False,
        metadata={PAGE_EXTRAS: _post_media_in},
        description="The post's images in order (0-4), each URL minted for the viewer: a "
        "PUBLIC post's cacheable for a window, other posts' short-lived (docs/API.md, "
        "'Image posts'). One query per response for every post's images.",
    )

    def __init__(self, row: models.Post | FeedPost) -> None:
        self.row = row
        self.id = strawberry.ID(str(row.id))
        self.body = row.body
        visibility = _VISIBILITIES.get(row.visibility)
        self.visibility = Visibility(row.visibility) if visibility is None else visibility
        self.created_at = row.created_at
        self.edited_at = row.edited_at
        self.like_count = row.like_count
        self.comment_count = row.comment_count


@strawberry.type(description="An image of a post.")
class Media:
    view: strawberry.Private[MediaView]
    url: str = strawberry.field(
        description="Where to GET the image: signed, it expires (PUBLIC posts' within one to "
        "two MEDIA_PUBLIC_URL_SECONDS windows, others' after MEDIA_PRIVATE_URL_SECONDS). "
        "Root-relative with the local store."
    )
    width: int
    height: int
    content_type: str = strawberry.field(
        description="image/jpeg, image/png, image/webp or image/gif."
    )
    alt: str | None = strawberry.field(description="The alt text given at createPost, if any.")

    def __init__(self, view: MediaView) -> None:
        self.view = view
        self.url = view.url
        self.width = view.width
        self.height = view.height
        self.content_type = view.content_type
        self.alt = view.alt


@strawberry.type(description="A header the upload's PUT must carry, exactly as given.")
class UploadHeader:
    name: str
    value: str


@strawberry.type(
    description="A presigned upload: PUT the bytes to `url` with `headers`, then pass `id` "
    "to createPost's `media`."
)
class Upload:
    id: strawberry.ID
    url: str = strawberry.field(
        description="Where to PUT the bytes (once); root-relative with the local store."
    )
    headers: list[UploadHeader]
    expires_at: datetime = strawberry.field(
        description="When the URL stops taking the bytes (MEDIA_UPLOAD_URL_SECONDS); the "
        "upload may be attached until MEDIA_UPLOAD_TTL_SECONDS after its creation."
    )


@strawberry.input(description="An image for createPost: an upload of the caller's, alt text.")
class MediaInput:
    upload_id: strawberry.ID
    alt: str | None = strawberry.field(
        default=None, description="Text for who cannot see the image (MEDIA_ALT_MAX_CHARS)."
    )


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
class CommentEdge:
    cursor: str
    node: Comment


@strawberry.type
class CommentConnection:
    edges: list[CommentEdge]
    page_info: PageInfo


@strawberry.type
class UserEdge:
    cursor: str
    node: User


@strawberry.type
class UserConnection:
    edges: list[UserEdge]
    page_info: PageInfo


@strawberry.type(description="Why a post is recommended to the viewer.")
class Recommendation:
    text: str = strawberry.field(description='E.g. "Liked by @ann and 2 others".')
    liked_by: list[User] = strawberry.field(
        description="Followees of the viewer who liked the post, newest first, at most 3; "
        "never a user across a block from the viewer."
    )
    liked_by_count: int = strawberry.field(
        description="How many of the viewer's followees liked the post."
    )


@strawberry.type
class PostEdge:
    cursor: str
    node: Post
    reason: FeedReason | None = strawberry.field(
        default=None,
        description="Why the post is in the viewer's feed; null outside the feed.",
    )
    recommendation: Recommendation | None = strawberry.field(
        default=None, description="Why the post is recommended: null unless RECOMMENDED."
    )


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
    # The page's authors and the viewer's likes, read with its rows (app.api.schema.feed).
    extras: strawberry.Private[PageExtras] = dataclasses.field(default_factory=PageExtras)


@strawberry.type
class AuthPayload:
    token: str
    user: User


@strawberry.type
class FeedUpdate:
    new_post_count: int
    latest_post_at: datetime | None


# -- rows to connections ---------------------------------------------------------------------


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


def post_connection(posts: list[models.Post], has_next: bool, has_previous: bool) -> PostConnection:
    edges = [PostEdge(cursor=keyset.encode(p.created_at, p.id), node=Post(row=p)) for p in posts]
    return PostConnection(edges=edges, page_info=page_info(edges, has_next, has_previous))


def user_connection(
    rows: list[tuple[models.User, datetime]], has_next: bool, has_previous: bool
) -> UserConnection:
    edges = [
        UserEdge(cursor=keyset.encode(followed_at, user.id), node=User(row=user))
        for user, followed_at in rows
    ]
    return UserConnection(edges=edges, page_info=page_info(edges, has_next, has_previous))
