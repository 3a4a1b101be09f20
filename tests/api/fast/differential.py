"""The differential tests' shared world (tests/api/fast/test_fast_execution.py,
tests/api/fast/test_compiled_documents.py): the regular path as the oracle.

Two schemas, FAST (app.api.fast.executor) and PLAIN (graphql-core's executor); a random social
graph built through the API (`build_world`) and changed one random step at a time
(`change`); `replayed_pages`, so that a feed's first page, which opens a new feed session on
every read, is read once and replayed to every path compared; the answer bytes as the HTTP
view encodes them; graphql-core's own refusal of a document, for comparison; `Gen`, a random
document the compiler can plan, and `compile_text`, its plan.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from strawberry.http import process_result

from app.api.endpoint.schema import build_schema
from app.api.fast.compiler import compile_documents
from app.api.schema.context import Context
from app.api.transports.trusted import Registered
from app.config import get_settings
from app.operation_documents import sha256_hex
from benchmarks.media_pages import feed_with_media as feed_with_media
from tests.helpers import block, follow, gql, make_user, post, sql, unfollow
from tests.media.images import image_bytes
from tests.media.steps import create_post, upload

FAST = build_schema(get_settings(), fast_execution=True)
PLAIN = build_schema(get_settings(), fast_execution=False)

POST_LEAVES = (
    "id",
    "body",
    "visibility",
    "createdAt",
    "editedAt",
    "likeCount",
    "commentCount",
    "viewerHasLiked",
)
USER_LEAVES = (
    "id",
    "handle",
    "displayName",
    "followerCount",
    "followingCount",
    "fanoutMode",
    "viewerFollows",
)
PAGE_INFO_LEAVES = ("hasNextPage", "hasPreviousPage", "startCursor", "endCursor")
MEDIA_LEAVES = ("url", "width", "height", "contentType", "alt", "__typename")


@contextmanager
def pinned_media_clock() -> Iterator[float]:
    """Within the block, every media URL is minted at one `now`: a FOLLOWERS or PRIVATE
    image's URL expires `now` + MEDIA_PRIVATE_URL_SECONDS, so two paths compared across a
    second's boundary would differ there and nowhere else. The URLs are still minted by
    app.media's code (MediaUrls), per viewer, as the regular path mints them."""
    import time

    from app.api.schema import loaders
    from app.media.urls import MediaUrls

    now = time.time()
    real = loaders.MediaUrls

    class Pinned(MediaUrls):
        def __init__(self, store: Any, policy: Any, at: float | None = None) -> None:
            super().__init__(store, policy, now if at is None else at)

    loaders.MediaUrls = Pinned  # type: ignore[misc]
    try:
        yield now
    finally:
        loaders.MediaUrls = real  # type: ignore[misc]


@contextmanager
def replayed_pages(state: Any) -> Iterator[dict[str, Any]]:
    """Within the block, the first read of a feed page is recorded and every later read with
    the same arguments (concurrent ones too) gets the same page, and so the same session."""
    real = state.feed.page
    recorded: dict[str, asyncio.Future[Any]] = {}

    async def page(*args: Any, **kwargs: Any) -> Any:
        key = repr((args, sorted(kwargs.items())))
        if key not in recorded:
            recorded[key] = asyncio.ensure_future(real(*args, **kwargs))
        return await asyncio.shield(recorded[key])

    state.feed.page = page
    try:
        yield recorded
    finally:
        del state.feed.page


async def answer(
    schema: Any, state: Any, query: str, variables: dict[str, Any], viewer: int | None
) -> bytes:
    """The JSON bytes the HTTP view would send (strawberry's process_result, orjson)."""
    context = Context(state=state, request=None, viewer_id=viewer)
    result = await schema.execute(query, variable_values=variables, context_value=context)
    return orjson.dumps(process_result(result))


@dataclass
class World:
    tokens: dict[str, str]
    ids: dict[str, int]
    posts: dict[int, str]  # post id -> author handle
    rng: random.Random
    images: dict[int, int] = field(default_factory=dict)  # image post id -> its images
    with_image_posts: bool = False  # `change` makes image posts too
    compared: int = 0
    http: int = 0
    with_posts: int = 0  # answers showing at least one post
    with_errors: int = 0
    with_images: int = 0  # media fields in the answers compared
    deleted: set[int] = field(default_factory=set)

    @property
    def handles(self) -> list[str]:
        return list(self.tokens)


async def end_cursors(state: Any, viewer_id: int) -> list[str]:
    """Cursors of a real first page (RANKED and CHRONOLOGICAL), for `after` arguments."""
    context = Context(state=state, request=None, viewer_id=viewer_id)
    query = "query($m: FeedMode) { feed(first: 3, mode: $m) { pageInfo { endCursor } } }"
    found = []
    for mode in ("RANKED", "CHRONOLOGICAL"):
        result = await PLAIN.execute(query, {"m": mode}, context_value=context)
        if result.data and result.data["feed"]["pageInfo"]["endCursor"]:
            found.append(result.data["feed"]["pageInfo"]["endCursor"])
    return found


async def build_world(client: Any, pipeline: Any, seed: int, images: bool = False) -> World:
    """`images`: image posts too (built and changed; the random stream differs then)."""
    rng = random.Random(seed)
    names = ["ann", "bob", "cat", "dan", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "leo"]
    tokens: dict[str, str] = {}
    ids: dict[str, int] = {}
    for handle in names:
        token, uid = await make_user(client, handle, f"{handle.title()} {rng.randint(1, 99)}")
        tokens[handle], ids[handle] = token, uid
    # "ann" has 11 followers: past the test pull threshold (10), her posts are pulled.
    for handle in names[1:]:
        await follow(client, tokens[handle], "ann")
    for handle in names:
        for other in rng.sample(names, 4):
            if other not in (handle, "ann"):
                await follow(client, tokens[handle], other)
    await pipeline.settle()
    posts: dict[int, str] = {}
    for i in range(36):
        author = rng.choice(names)
        visibility = rng.choice(("PUBLIC", "PUBLIC", "FOLLOWERS", "PRIVATE"))
        posts[await post(client, tokens[author], f"post {i} by {author}", visibility)] = author
    world = World(tokens, ids, posts, rng, with_image_posts=images)
    for i in range(10 if images else 0):  # image posts: 1-2 images, every visibility
        author = rng.choice(names)
        visibility = rng.choice(("PUBLIC", "FOLLOWERS", "PRIVATE"))
        post_id = await image_post(client, world, tokens[author], visibility, f"image post {i}")
        posts[post_id] = author
    await pipeline.settle()
    for _ in range(30):
        await engage(client, world)
    return world


async def image_post(
    client: Any, world: World, token: str, visibility: str = "PUBLIC", body: str = ""
) -> int:
    """A post with 1-2 images (uploaded through createUpload and its PUT, as a client
    does), each in one of four formats, colours and sizes, with or without alt text."""
    rng = world.rng
    media = []
    for _ in range(rng.randint(1, 2)):
        fmt, content_type = rng.choice(
            (("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"),
             ("GIF", "image/gif"))
        )  # fmt: skip
        size = rng.choice(((64, 48), (8, 8), (30, 90)))
        color = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        data = image_bytes(fmt, size, color)
        alt = rng.choice((None, "a square", 'ünïcode "alt" \\ 🎉'))
        media.append({"uploadId": await upload(client, token, data, content_type), "alt": alt})
    made = await create_post(client, token, media, body, visibility)
    post_id = int(made.ok()["createPost"]["id"])
    world.images[post_id] = len(media)
    return post_id


async def engage(client: Any, world: World) -> None:
    """A like, an unlike or a comment by a random user on a random post (refusals allowed:
    a post the user cannot see answers NOT_FOUND)."""
    rng = world.rng
    handle = rng.choice(world.handles)
    post_id = str(rng.choice(list(world.posts)))
    kind = rng.choice(("LikePost", "LikePost", "UnlikePost", "AddComment"))
    variables: dict[str, Any] = {"id": post_id}
    if kind == "AddComment":
        variables = {"postId": post_id, "body": f"comment {rng.randint(0, 999)}"}
    await gql(client, kind, variables, token=world.tokens[handle])


async def change(client: Any, state: Any, world: World) -> str:
    """One random change of the world; its name."""
    rng = world.rng
    kinds = (
        "engage",
        "edit",
        "visibility",
        "delete",
        "block",
        "name",
        "follow",
        "unfollow",
        "post",
    )
    kind = rng.choice((*kinds, "image") if world.with_image_posts else kinds)
    handle = rng.choice(world.handles)
    token = world.tokens[handle]
    own = [p for p, a in world.posts.items() if a == handle and p not in world.deleted]
    if kind == "engage":
        await engage(client, world)
    elif kind == "edit" and own:
        variables = {"id": str(rng.choice(own)), "body": f"edited {rng.randint(0, 9999)}"}
        (await gql(client, "EditPost", variables, token=token)).ok()
    elif kind == "visibility" and own:
        visibility = rng.choice(("PUBLIC", "FOLLOWERS", "PRIVATE"))
        variables = {"id": str(rng.choice(own)), "visibility": visibility}
        changed = await gql(client, "SetPostVisibility", variables, token=token)
        if changed.codes != ["RATE_LIMITED"]:  # a post widened past its hourly bound: kept
            changed.ok()
    elif kind == "delete" and own:
        victim = rng.choice(own)
        (await gql(client, "DeletePost", {"id": str(victim)}, token=token)).ok()
        world.deleted.add(victim)  # still asked for by post(id): null
    elif kind == "block":
        other = rng.choice([h for h in world.handles if h != handle])
        await block(client, token, other)
    elif kind == "name":
        # No mutation renames a user: the row changes under the API, as an admin tool would.
        other = rng.choice(world.handles)
        await sql(
            "UPDATE users SET display_name = $1 WHERE handle = $2",
            f"{other.title()} renamed {rng.randint(0, 999)}",
            other,
        )
    elif kind == "follow":
        other = rng.choice([h for h in world.handles if h != handle])
        await gql(client, "Follow", {"handle": other}, token=token)  # refused when blocked
    elif kind == "unfollow":
        other = rng.choice([h for h in world.handles if h != handle])
        await unfollow(client, token, other)
    elif kind == "image":
        visibility = rng.choice(("PUBLIC", "FOLLOWERS", "PRIVATE"))
        world.posts[await image_post(client, world, token, visibility)] = handle
    else:
        world.posts[await post(client, token, f"new by {handle}")] = handle
    return kind


def gql_text(name: str) -> str:
    from app.operation_documents import operations

    return operations()[name]


def graphql_core_refusal(query: str) -> list[str]:
    """What graphql-core itself answers (the spec's "GetOperation"): the messages."""
    from graphql import execute, parse

    result = execute(PLAIN._schema, parse(query))
    assert result.data is None and result.errors
    return [e.message for e in result.errors]


def refusal_of(body: dict[str, Any]) -> list[tuple[str, str]]:
    assert body.get("data") is None, body
    return [(e["message"], e["extensions"]["code"]) for e in body["errors"]]


# -- random documents the compiler plans ------------------------------------------------------

PLANNED_POST_LEAVES = (*POST_LEAVES, "__typename")
PLANNED_AUTHOR_LEAVES = tuple(f for f in USER_LEAVES if f != "viewerFollows")  # not planned
PLANNED_PAGE_INFO_LEAVES = (*PAGE_INFO_LEAVES, "__typename")


def compile_text(text: str) -> Any:
    """The compiled plan of one document text (None: left to the regular path)."""
    from graphql import parse

    entry = Registered("Q", text, sha256_hex(text), parse(text))
    return compile_documents(PLAIN._schema, {text: entry}, PLAIN.process_errors).get(text)


class Gen:
    """A random document the compiler can plan: no directives, no key twice (the compiled
    documents' differential tests and the row plans' tests)."""

    def __init__(self, rng: random.Random, cursors: list[str]) -> None:
        self.rng = rng
        self.cursors = cursors
        self.fragments: dict[str, str] = {}
        self.variables: dict[str, tuple[str, Any]] = {}  # name -> (type, value or absent)
        self.n = 0

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def key(self, name: str) -> str:
        return f"{self.fresh('a')}: {name}" if self.rng.random() < 0.15 else name

    def wrap(self, type_name: str, parts: list[str]) -> str:
        out = []
        for part in parts:
            roll = self.rng.random()
            if roll < 0.1:
                out.append(f"... on {type_name} {{ {part} }}")
            elif roll < 0.15:
                out.append(f"... {{ {part} }}")
            elif roll < 0.25:
                name = self.fresh("F")
                self.fragments[name] = f"fragment {name} on {type_name} {{ {part} }}"
                out.append(f"...{name}")
            else:
                out.append(part)
        return "{ " + " ".join(out) + " }"

    def leaves(self, type_name: str, names: tuple[str, ...], extra: list[str]) -> str:
        chosen = [self.key(n) for n in names if self.rng.random() < 0.6] + extra
        if not chosen:
            chosen = [self.rng.choice(names)]
        self.rng.shuffle(chosen)
        return self.wrap(type_name, chosen)

    def post(self) -> str:
        extra = []
        if self.rng.random() < 0.8:
            extra.append(f"{self.key('author')} {self.leaves('User', PLANNED_AUTHOR_LEAVES, [])}")
        if self.rng.random() < 0.5:
            extra.append(f"{self.key('media')} {self.leaves('Media', MEDIA_LEAVES, [])}")
        return self.leaves("Post", PLANNED_POST_LEAVES, extra)

    def connection(self) -> str:
        edge = [f"{self.key('node')} {self.post()}"]
        if self.rng.random() < 0.7:
            edge.append(self.key("cursor"))
        parts = [f"{self.key('edges')} {self.wrap('PostEdge', edge)}"]
        if self.rng.random() < 0.7:
            parts.append(
                f"{self.key('pageInfo')} {self.leaves('PageInfo', PLANNED_PAGE_INFO_LEAVES, [])}"
            )
        for leaf in ("sessionId", "degraded", "__typename"):
            if self.rng.random() < 0.4:
                parts.append(self.key(leaf))
        return self.wrap("FeedConnection", parts)

    def argument(self, name: str, graphql_type: str, value: Any, literal: str) -> str | None:
        roll = self.rng.random()
        if roll < 0.25:
            return None  # the argument's own default
        if roll < 0.45:
            return f"{name}: {literal}"
        var = self.fresh(name)
        if self.rng.random() < 0.25:  # a default in the operation, maybe no value sent
            self.variables[var] = (f"{graphql_type} = {literal}", self._maybe(value))
        else:
            self.variables[var] = (graphql_type, self._maybe(value))
        return f"{name}: ${var}"

    def _maybe(self, value: Any) -> Any:
        roll = self.rng.random()
        return ... if roll < 0.15 else (None if roll < 0.25 else value)  # ... = not sent

    def document(self) -> tuple[str, dict[str, Any]]:
        size = self.rng.choice((1, 3, 5, 20, 20, 100, 0))  # 0: BAD_USER_INPUT
        mode = self.rng.choice(("RANKED", "CHRONOLOGICAL"))
        after = self.rng.choice([*self.cursors, "bm9wZQ"]) if self.cursors else "bm9wZQ"
        args = [
            self.argument("first", "Int", size, str(size)),
            self.argument("mode", "FeedMode", mode, mode),
        ]
        if self.rng.random() < 0.4:
            args.append(self.argument("after", "String", after, orjson.dumps(after).decode()))
        given = [a for a in args if a]
        label = self.key("feed")
        root = f"{label}{'(' + ', '.join(given) + ')' if given else ''} {self.connection()}"
        declared = ", ".join(f"${n}: {t}" for n, (t, _) in self.variables.items())
        head = f"query Q({declared})" if declared else "query Q"
        text = " ".join([f"{head} {{ {root} }}", *self.fragments.values()])
        values = {n: v for n, (_, v) in self.variables.items() if v is not ...}
        return text, values
