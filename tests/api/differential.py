"""The differential tests' shared world (tests/api/test_fast_execution.py,
tests/api/test_compiled_documents.py): the regular path as the oracle.

Two schemas, FAST (app.api.fast.executor) and PLAIN (graphql-core's executor); a random social
graph built through the API (`build_world`) and changed one random step at a time
(`change`); `replayed_pages`, so that a feed's first page, which opens a new feed session on
every read, is read once and replayed to every path compared; the answer bytes as the HTTP
view encodes them; graphql-core's own refusal of a document, for comparison.
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
from app.api.schema.context import Context
from app.config import get_settings
from tests.helpers import block, follow, gql, make_user, post, sql, unfollow

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
    compared: int = 0
    http: int = 0
    with_posts: int = 0  # answers showing at least one post
    with_errors: int = 0
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


async def build_world(client: Any, pipeline: Any, seed: int) -> World:
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
    await pipeline.settle()
    world = World(tokens, ids, posts, rng)
    for _ in range(30):
        await engage(client, world)
    return world


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
    kind = rng.choice(
        ("engage", "edit", "visibility", "delete", "block", "name", "follow", "unfollow", "post")
    )
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
