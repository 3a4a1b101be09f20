"""The fast executor (app.api.fast.executor) answers the same bytes as graphql-core's.

Differential tests: every document runs through a schema built with `fast_execution=True`,
one built with False (graphql-core's executor, EventScopedExecutor), and often through the
app over HTTP too (FAST_EXECUTION on by default); the JSON answers (data and errors, as the
HTTP view encodes them) must be equal byte for byte.

- Random documents over Feed/Post/User/PostConnection (aliases, named and inline fragments,
  __typename, @include/@skip with variables and literals, nested authors and their posts,
  counts, viewerHasLiked/viewerFollows, field errors) on a random social graph, read by
  several viewers and anonymously; again after each round of likes, unlikes, comments,
  edits, visibility changes, deletes, blocks, follows and display-name changes.
- The same on a small schema of its own whose resolvers misbehave on purpose: nulls in
  non-null fields, values a scalar cannot serialize, raised and returned exceptions,
  awaitables, async resolvers, interfaces, lists with nulls: every error path.

A feed's first page makes a new feed session (a random id) on every read: within one
comparison the feed service's page is recorded on the first read and replayed to the others,
so the executors are what is compared, not two sessions.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any, NewType

import orjson
import pytest
import strawberry
from strawberry.http import process_result
from strawberry.schema.config import StrawberryConfig

from app.api.endpoint.schema import build_schema
from app.api.fast.executor import EventScopedExecutor, FastExecutor
from app.api.schema.context import Context
from app.config import get_settings
from tests.api.fast.differential import (
    FAST,
    PAGE_INFO_LEAVES,
    PLAIN,
    POST_LEAVES,
    USER_LEAVES,
    World,
    answer,
    build_world,
    change,
    end_cursors,
    gql_text,
    graphql_core_refusal,
    refusal_of,
    replayed_pages,
)
from tests.helpers import block, gql, make_user, sql


def test_the_app_runs_the_fast_executor_by_default() -> None:
    assert build_schema(get_settings()).execution_context_class is FastExecutor
    assert FAST.execution_context_class is FastExecutor
    assert PLAIN.execution_context_class is EventScopedExecutor
    assert issubclass(FastExecutor, EventScopedExecutor)  # keeps the subscription fix


def test_the_feeds_fields_take_the_fast_steps() -> None:
    """What each field of a feed page does: a Strawberry upgrade that renamed its resolver
    wrappers would turn them all back to graphql-core's path (still the same bytes, so the
    differential tests would not notice the lost speed)."""
    from app.api.fast import executor as fast_exec

    schema = FAST._schema

    def kind(type_name: str, field_name: str) -> int:
        field_def = schema.get_field(schema.get_type(type_name), field_name)  # type: ignore[arg-type]
        return fast_exec.classify_field(FAST, field_def, field_name)[0]  # type: ignore[arg-type]

    for field_name in ("id", "body", "visibility", "createdAt", "editedAt", "likeCount"):
        assert kind("Post", field_name) == fast_exec.LEAF, field_name
    assert kind("User", "displayName") == fast_exec.LEAF
    assert kind("Post", "author") == fast_exec.DIRECT
    assert kind("Post", "viewerHasLiked") == fast_exec.DIRECT
    assert kind("PostEdge", "node") == fast_exec.OBJECT
    assert kind("FeedConnection", "edges") == fast_exec.LIST
    assert kind("Post", "__typename") == fast_exec.TYPENAME
    assert kind("User", "posts") == fast_exec.SLOW  # arguments
    assert kind("Query", "feed") == fast_exec.SLOW  # async


# -- random documents over the app's schema -----------------------------------------------


@dataclass
class Doc:
    """A document being generated: its variables and fragments, and limits kept under the
    API's own (aliases <= 20, depth <= 10, tokens <= 2000)."""

    rng: random.Random
    handles: list[str]
    post_ids: list[int]
    cursors: list[str]
    variables: dict[str, tuple[str, Any]] = field(default_factory=dict)
    fragments: dict[str, str] = field(default_factory=dict)
    aliases: int = 0
    names: int = 0

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def directive(self) -> str:
        """Nothing mostly; else @include/@skip on a variable (sometimes with a default
        and no value) or a literal."""
        roll = self.rng.random()
        if roll > 0.25:
            return ""
        kind = self.rng.choice(("include", "skip"))
        if roll < 0.05:
            return f" @{kind}(if: {self.rng.choice(('true', 'false'))})"
        name = self.fresh("v")
        value = self.rng.random() < 0.5
        if self.rng.random() < 0.2:
            self.variables[name] = (f"Boolean = {str(value).lower()}", None)
        else:
            self.variables[name] = ("Boolean!", value)
        return f" @{kind}(if: ${name})"

    def name(self, field_name: str) -> str:
        if self.aliases < 14 and self.rng.random() < 0.2:
            self.aliases += 1
            return f"{self.fresh('a')}: {field_name}"
        return field_name

    def wrap(self, type_name: str, selections: list[str]) -> list[str]:
        """Move some selections into inline fragments or named fragment spreads."""
        out: list[str] = []
        i = 0
        while i < len(selections):
            roll = self.rng.random()
            take = self.rng.randint(1, 3)
            chunk = " ".join(selections[i : i + take])
            if roll < 0.12:  # an inline fragment, with a type condition or a directive
                head = f" on {type_name}" if self.rng.random() < 0.5 else self.directive()
                out.append(f"...{head} {{ {chunk} }}")
                i += take
            elif roll < 0.22:
                fragment = self.fresh("F")
                self.fragments[fragment] = f"fragment {fragment} on {type_name} {{ {chunk} }}"
                out.append(f"...{fragment}{self.directive()}")
                i += take
            else:
                out.append(selections[i])
                i += 1
        return out

    def fields(self, type_name: str, leaves: tuple[str, ...], objects: list[str]) -> str:
        chosen = [f for f in leaves if self.rng.random() < 0.55] or [self.rng.choice(leaves)]
        chosen = [f"{self.name(f)}{self.directive()}" for f in chosen]
        if self.rng.random() < 0.1:  # the same field twice: merged
            chosen.append(chosen[0])
        if self.rng.random() < 0.35:
            chosen.append(f"{self.name('__typename')}{self.directive()}")
        chosen += objects
        self.rng.shuffle(chosen)
        return "{ " + " ".join(self.wrap(type_name, chosen)) + " }"

    def user(self, depth: int) -> str:
        objects = []
        if depth <= 4 and self.rng.random() < 0.3:
            first = self.rng.choice((1, 2, 3, 5, 20, 0)) if self.rng.random() < 0.9 else 101
            objects.append(
                f"{self.name('posts')}(first: {first}){self.directive()} "
                + self.connection("PostConnection", depth + 1)
            )
        return self.fields("User", USER_LEAVES, objects)

    def post(self, depth: int) -> str:
        objects = []
        if self.rng.random() < 0.8:
            objects.append(f"{self.name('author')}{self.directive()} {self.user(depth + 1)}")
        return self.fields("Post", POST_LEAVES, objects)

    def connection(self, type_name: str, depth: int) -> str:
        edge_fields = []
        if self.rng.random() < 0.6:
            edge_fields.append(f"{self.name('cursor')}{self.directive()}")
        edge_fields.append(f"{self.name('node')}{self.directive()} {self.post(depth + 2)}")
        if self.rng.random() < 0.2:
            edge_fields.append(f"{self.name('__typename')}")
        self.rng.shuffle(edge_fields)
        objects = [f"{self.name('edges')}{self.directive()} {{ {' '.join(edge_fields)} }}"]
        if self.rng.random() < 0.6:
            objects.append(
                f"{self.name('pageInfo')}{self.directive()} "
                + self.fields("PageInfo", PAGE_INFO_LEAVES, [])
            )
        leaves: tuple[str, ...] = ("__typename",)
        if type_name == "FeedConnection":
            leaves = ("sessionId", "degraded", "__typename")
        return self.fields(type_name, leaves, objects)

    def root(self) -> str:
        fields: list[str] = []
        used: set[str] = set()
        for _ in range(self.rng.choice((1, 1, 1, 2, 3))):
            kind = self.rng.choice(("feed", "feed", "feed", "post", "user", "viewer"))
            # The same root field twice (other arguments) needs an alias.
            label = f"{self.fresh('r')}: {kind}" if kind in used else self.name(kind)
            used.add(kind)
            if kind == "feed":
                args = []
                if self.rng.random() < 0.7:
                    name = self.fresh("first")
                    size = self.rng.choice((1, 3, 5, 20, 20, 100))
                    if self.rng.random() < 0.03:
                        size = 0  # BAD_USER_INPUT: a root field error, data null
                    self.variables[name] = ("Int", size)
                    args.append(f"first: ${name}")
                if self.rng.random() < 0.5:
                    args.append(f"mode: {self.rng.choice(('RANKED', 'CHRONOLOGICAL'))}")
                if self.cursors and self.rng.random() < 0.3:
                    name = self.fresh("after")
                    self.variables[name] = ("String", self.rng.choice(self.cursors))
                    args.append(f"after: ${name}")
                arguments = f"({', '.join(args)})" if args else ""
                fields.append(
                    f"{label}{arguments}{self.directive()} " + self.connection("FeedConnection", 1)
                )
            elif kind == "post":
                ident = (
                    str(self.rng.choice(self.post_ids))
                    if self.post_ids and self.rng.random() < 0.9
                    else self.rng.choice(("1", "nonsense"))
                )
                fields.append(f'{label}(id: "{ident}") {self.post(1)}')
            elif kind == "user":
                handle = self.rng.choice([*self.handles, "nobody"])
                fields.append(f'{label}(handle: "{handle}") {self.user(1)}')
            else:
                fields.append(f"{label} {self.user(1)}")
        if self.rng.random() < 0.1:
            fields.append("__typename")
        body = "{ " + " ".join(self.wrap("Query", fields)) + " }"
        declared = ", ".join(f"${n}: {t}" for n, (t, _) in self.variables.items())
        head = f"query Q({declared})" if declared else "query Q"
        return " ".join([head + " " + body, *self.fragments.values()])

    def values(self) -> dict[str, Any]:
        return {n: v for n, (t, v) in self.variables.items() if "=" not in t}


def random_document(
    rng: random.Random, handles: list[str], post_ids: list[int], cursors: list[str]
) -> tuple[str, dict[str, Any]]:
    doc = Doc(rng, handles, post_ids, cursors)
    text = doc.root()
    return text, doc.values()


async def compare_random(client: Any, state: Any, world: World, documents: int) -> None:
    rng = world.rng
    viewers = [*world.handles, None]
    for _ in range(documents):
        viewer = rng.choice(viewers)
        viewer_id = world.ids[viewer] if viewer else None
        cursors = await end_cursors(state, viewer_id) if viewer_id and rng.random() < 0.4 else []
        query, variables = random_document(rng, world.handles, list(world.posts), cursors)
        await compare(client, state, world, query, variables, viewer, http=rng.random() < 0.3)


async def compare(
    client: Any,
    state: Any,
    world: World,
    query: str,
    variables: dict[str, Any],
    viewer: str | None,
    http: bool = False,
) -> bytes:
    viewer_id = world.ids[viewer] if viewer else None
    with replayed_pages(state):
        plain = await answer(PLAIN, state, query, variables, viewer_id)
        fast = await answer(FAST, state, query, variables, viewer_id)
        if http:
            token = world.tokens[viewer] if viewer else None
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            response = await client.post(
                "/graphql", json={"query": query, "variables": variables}, headers=headers
            )
            world.http += 1
            assert response.content == plain, (query, variables, viewer)
    assert fast == plain, (
        f"\n{query}\n{variables}\nviewer {viewer}\nfast  {fast!r}\nplain {plain!r}"
    )
    world.compared += 1
    world.with_posts += _has_edges(orjson.loads(plain).get("data"))
    world.with_errors += b'"errors":[' in plain
    return plain


def _has_edges(value: Any) -> bool:
    """Whether an answer holds a non-empty list of edges (a page that shows posts)."""
    if isinstance(value, list):
        return any(isinstance(v, dict) for v in value) or any(_has_edges(v) for v in value)
    if isinstance(value, dict):
        return any(_has_edges(v) for v in value.values())
    return False


async def test_random_documents_answer_the_same_bytes(client, state, pipeline) -> None:
    world = await build_world(client, pipeline, seed=1010)
    await compare_random(client, state, world, documents=80)
    for round_no in range(8):
        for _ in range(3):
            await change(client, state, world)
        if round_no % 2:
            await pipeline.settle()  # else the changes are not fanned out yet
        await compare_random(client, state, world, documents=25)
    assert world.compared == 80 + 8 * 25
    assert world.http > 30
    print(f"posts in {world.with_posts}, errors in {world.with_errors} of {world.compared}")
    assert world.with_posts > world.compared // 4
    assert world.with_errors > 5


async def test_the_same_bytes_right_after_each_kind_of_change(client, state, pipeline) -> None:
    """The Feed and Post documents the demo sends, compared right after every change that
    alters what they show, with the change seen in the answer (nothing read is stale)."""
    world = await build_world(client, pipeline, seed=77)
    viewer, author = "bob", "ann"
    feed = gql_text("Feed")
    target = next(p for p, a in world.posts.items() if a == author)
    (await gql(client, "SetPostVisibility", {"id": str(target), "visibility": "PUBLIC"},
               token=world.tokens[author])).ok()  # fmt: skip
    await pipeline.settle()
    post_doc = gql_text("Post")

    async def both(check: str) -> dict[str, Any]:
        await compare(client, state, world, feed, {"first": 100}, viewer, http=True)
        await compare(client, state, world, feed, {"first": 100, "mode": "CHRONOLOGICAL"}, viewer)
        body = await compare(client, state, world, post_doc, {"id": str(target)}, viewer, True)
        found = orjson.loads(body)["data"]["post"]
        assert found is not None, check
        return dict(found)

    before = await both("start")
    (await gql(client, "LikePost", {"id": str(target)}, token=world.tokens[viewer])).ok()
    liked = await both("like")
    assert liked["viewerHasLiked"] is True
    assert liked["likeCount"] == before["likeCount"] + (0 if before["viewerHasLiked"] else 1)
    (await gql(client, "UnlikePost", {"id": str(target)}, token=world.tokens[viewer])).ok()
    assert (await both("unlike"))["viewerHasLiked"] is False
    variables = {"postId": str(target), "body": "a comment"}
    (await gql(client, "AddComment", variables, token=world.tokens["cat"])).ok()
    assert (await both("comment"))["commentCount"] == liked["commentCount"] + 1
    variables = {"id": str(target), "body": "an edited body"}
    (await gql(client, "EditPost", variables, token=world.tokens[author])).ok()
    edited = await both("edit")
    assert edited["body"] == "an edited body" and edited["editedAt"]
    await sql("UPDATE users SET display_name = 'Ann Renamed' WHERE handle = 'ann'")
    assert (await both("display name"))["author"]["displayName"] == "Ann Renamed"
    await sql("UPDATE users SET handle = 'ann2' WHERE handle = 'ann'")
    assert (await both("handle"))["author"]["handle"] == "ann2"
    await sql("UPDATE users SET handle = 'ann' WHERE handle = 'ann2'")
    variables = {"id": str(target), "visibility": "FOLLOWERS"}
    (await gql(client, "SetPostVisibility", variables, token=world.tokens[author])).ok()
    assert (await both("visibility"))["visibility"] == "FOLLOWERS"
    await block(client, world.tokens[author], viewer)
    body = await compare(client, state, world, post_doc, {"id": str(target)}, viewer, True)
    assert orjson.loads(body)["data"]["post"] is None  # blocked: hidden
    await compare(client, state, world, feed, {"first": 100}, viewer, http=True)


async def test_mutation_answers_match_a_plain_read(client, state, pipeline) -> None:
    """Mutations run through the fast executor (the app's default); their Post answers equal
    graphql-core's answer to `post(id)` with the same selection right after."""
    world = await build_world(client, pipeline, seed=5)
    handle = "bob"
    token = world.tokens[handle]
    own = next(p for p, a in world.posts.items() if a == handle)
    read = gql_text("Post")  # post(id) { ...PostFields }, the mutations' selection
    for name, variables in (
        ("LikePost", {"id": str(own)}),
        ("UnlikePost", {"id": str(own)}),
        ("EditPost", {"id": str(own), "body": "new words"}),
        ("SetPostVisibility", {"id": str(own), "visibility": "FOLLOWERS"}),
    ):
        data = (await gql(client, name, variables, token=token)).ok()
        mutated = next(iter(data.values()))
        context = Context(state=state, request=None, viewer_id=world.ids[handle])
        result = await PLAIN.execute(read, {"id": str(own)}, context_value=context)
        assert result.errors is None
        assert orjson.dumps(mutated) == orjson.dumps(result.data["post"]), name  # type: ignore[index]


# -- several operations: the one to run must be named ----------------------------------------

TWO_OPERATIONS = "query A { viewer { id } } query B { viewer { handle } }"


async def test_two_operations_without_a_name_are_refused_by_every_executor(client, state) -> None:
    """Strawberry ran the first operation; graphql-core (and the spec) refuse the document.
    The same refusal from both executors and over POST and GET; a name picks one."""
    expected = [(message, "BAD_USER_INPUT") for message in graphql_core_refusal(TWO_OPERATIONS)]
    answers = [await answer(schema, state, TWO_OPERATIONS, {}, None) for schema in (FAST, PLAIN)]
    assert answers[0] == answers[1]
    assert refusal_of(orjson.loads(answers[0])) == expected
    posted = await client.post("/graphql", json={"query": TWO_OPERATIONS})
    got = await client.get("/graphql", params={"query": TWO_OPERATIONS})
    for response in (posted, got):
        assert response.status_code == 200
        assert response.content == answers[0]
    for name in ("A", "B"):
        named = {"query": TWO_OPERATIONS, "operationName": name}
        response = await client.post("/graphql", json=named)
        assert response.json() == {"data": {"viewer": None}}, name
        got = await client.get("/graphql", params=named)
        assert got.content == response.content


async def test_two_operations_without_a_name_are_refused_over_the_websocket() -> None:
    from tests.realtime.live import LiveClient
    from tests.servers import ApiServer

    expected = [(message, "BAD_USER_INPUT") for message in graphql_core_refusal(TWO_OPERATIONS)]
    async with ApiServer() as api:
        async with api.http() as http:
            token, _ = await make_user(http, "socket")
        live = await LiveClient.open(api, token, subscribe=False)
        try:
            for op_id, payload in (
                ("1", {"query": TWO_OPERATIONS}),
                ("2", {"query": TWO_OPERATIONS, "operationName": "B"}),
            ):
                await live.ws.send(
                    orjson.dumps({"id": op_id, "type": "subscribe", "payload": payload}).decode()
                )
                message = orjson.loads(await asyncio.wait_for(live.ws.recv(), 5))
                assert message["id"] == op_id, message
                if op_id == "1":  # the protocol's `error`: the operation is over
                    assert message["type"] == "error", message
                    assert [
                        (e["message"], e["extensions"]["code"]) for e in message["payload"]
                    ] == expected
                else:
                    assert message == {
                        "id": "2",
                        "type": "next",
                        "payload": {"data": {"viewer": {"handle": "socket"}}},
                    }
        finally:
            await live.close()


# -- a schema whose resolvers misbehave: every error path ----------------------------------


@strawberry.enum
class Color(Enum):
    RED = "red"
    BLUE = "blue"


@strawberry.interface
class Node:
    id: strawberry.ID


async def _later(value: Any) -> Any:
    await asyncio.sleep(0)
    return value


async def _fail_later() -> Any:
    await asyncio.sleep(0)
    raise ValueError("failed later")


# A scalar that serializes anything, and "none" to None (graphql-core's error for a leaf).
Loose = NewType("Loose", object)
LOOSE = strawberry.scalar(
    name="Loose", serialize=lambda v: None if v == "none" else str(v), parse_value=str
)


@strawberry.type
class Thing(Node):
    """Implements an interface, so graphql-core checks it with is_type_of: the slow path."""

    id: strawberry.ID
    name: str


@strawberry.type
class Item:
    id: strawberry.ID
    name: str
    maybe: str | None
    color: Color
    when: datetime
    count: int
    # Misbehaving attributes, set per item below.
    strict: str  # None on some items: a null in a non-null field
    number: int  # a string on some items: a value Int cannot serialize
    color_or_error: Color | None  # an Exception instance on some items
    awaited: str  # an awaitable on some items
    child: Item | None
    strict_child: Item  # None on some items: the null propagates to the parent
    children: list[Item]
    loose_children: list[Item | None]
    strict_children: list[Item]  # None inside on some items
    thing: Node
    loose: Loose  # "none" serializes to None; an Exception would serialize too (str)

    @strawberry.field
    def computed(self) -> str:
        return f"computed {self.id}"

    @strawberry.field
    def raises(self) -> str:
        raise ValueError(f"raises on {self.id}")

    @strawberry.field
    def raises_nullable(self) -> str | None:
        raise ValueError(f"raises nullable on {self.id}")

    @strawberry.field
    def returns_error(self) -> str | None:
        return ValueError("returned, not raised")  # type: ignore[return-value]

    @strawberry.field
    def later(self) -> int:
        return _later(int(self.id))  # type: ignore[return-value]

    @strawberry.field
    def fails_later(self) -> int | None:
        return _fail_later()  # type: ignore[no-any-return]

    @strawberry.field
    async def async_name(self) -> str:
        await asyncio.sleep(0)
        return f"async {self.name}"

    @strawberry.field
    def with_arg(self, x: int = 1) -> int:
        return x * 2

    @strawberry.field
    def path(self, info: strawberry.Info) -> str:
        return ".".join(str(k) for k in info.path.as_list())

    @strawberry.field
    def parent_name(self, root: Item) -> str:
        return f"root {root.name}"

    @strawberry.field
    def resolver_null(self) -> str:
        return None  # type: ignore[return-value]

    @strawberry.field
    def resolver_child(self) -> Item | None:
        return self.child

    @strawberry.field
    def resolver_strict_child(self) -> Item:
        return self.strict_child

    @strawberry.field
    def later_child(self) -> Item | None:
        return _later(self.child)  # type: ignore[return-value]

    @strawberry.field
    def bad_color(self) -> Color:
        return "green"  # type: ignore[return-value]


def make_items(rng: random.Random, n: int, depth: int = 0) -> list[Item]:
    items = []
    for i in range(n):
        ident = rng.randint(1, 10_000)
        kids = make_items(rng, rng.randint(0, 2), depth + 1) if depth < 2 else []
        strict_kids: list[Any] = list(kids)
        if strict_kids and rng.random() < 0.2:
            strict_kids[0] = None
        items.append(
            Item(
                id=strawberry.ID(str(ident)),
                name=f"item {ident}",
                maybe=rng.choice((None, f"maybe {i}")),
                color=rng.choice(list(Color)),
                when=datetime(2024, 1, 1 + i % 27, 12, i % 60, tzinfo=UTC),
                count=rng.randint(-5, 5),
                strict=None if rng.random() < 0.15 else f"strict {i}",  # type: ignore[arg-type]
                number="x" if rng.random() < 0.15 else i,  # type: ignore[arg-type]
                color_or_error=ValueError("error") if rng.random() < 0.2 else Color.RED,  # type: ignore[arg-type]
                awaited=_later(f"awaited {i}") if rng.random() < 0.3 else f"plain {i}",  # type: ignore[arg-type]
                child=kids[0] if kids and rng.random() < 0.7 else None,
                strict_child=kids[-1] if kids and rng.random() < 0.8 else None,  # type: ignore[arg-type]
                children=kids,
                loose_children=[*kids, None] if rng.random() < 0.5 else kids,
                strict_children=strict_kids,
                thing=Thing(id=strawberry.ID(f"t{ident}"), name=f"thing {ident}"),
                loose=rng.choice(("text", "none", ValueError("loose error"), 17)),  # type: ignore[arg-type]
            )
        )
    return items


def _items(info: strawberry.Info) -> list[Item]:
    return info.context["items"]  # type: ignore[no-any-return]


@strawberry.type
class ToyQuery:
    @strawberry.field
    def items(self, info: strawberry.Info) -> list[Item]:
        return _items(info)

    @strawberry.field
    def item(self, info: strawberry.Info) -> Item | None:
        return _items(info)[0] if _items(info) else None

    @strawberry.field
    def strict_item(self, info: strawberry.Info) -> Item:
        return _items(info)[-1]

    @strawberry.field
    async def later_items(self, info: strawberry.Info) -> list[Item | None]:
        await asyncio.sleep(0)
        return [*_items(info)[:2], None]


class QuietSchema(strawberry.Schema):
    def process_errors(self, errors: Any, execution_context: Any = None) -> None:
        pass  # these errors are the point: no log lines for them


TOY = {
    executor: QuietSchema(
        query=ToyQuery,
        types=[Thing],
        execution_context_class=executor,
        config=StrawberryConfig(scalar_map={Loose: LOOSE}),
    )
    for executor in (FastExecutor, EventScopedExecutor)
}
ITEM_LEAVES = (
    "id",
    "name",
    "maybe",
    "color",
    "when",
    "count",
    "strict",
    "number",
    "colorOrError",
    "awaited",
    "computed",
    "raises",
    "raisesNullable",
    "returnsError",
    "later",
    "failsLater",
    "asyncName",
    "withArg",
    "path",
    "parentName",
    "resolverNull",
    "badColor",
    "loose",
)
ITEM_OBJECTS = (
    "child",
    "strictChild",
    "children",
    "looseChildren",
    "strictChildren",
    "resolverChild",
    "resolverStrictChild",
    "laterChild",
)


def toy_selection(doc: Doc, depth: int) -> str:
    rng = doc.rng
    chosen = [f for f in ITEM_LEAVES if rng.random() < 0.2] or ["id"]
    chosen = [f"{doc.name(f)}{doc.directive()}" for f in chosen]
    if rng.random() < 0.2:
        chosen.append(f"{doc.fresh('x')}: withArg(x: {rng.randint(0, 9)})")
    if rng.random() < 0.3:
        chosen.append(doc.name("__typename"))
    if rng.random() < 0.2:
        chosen.append(f"{doc.name('thing')} {{ __typename id ... on Thing {{ name }} }}")
    if depth < 3:
        for name in ITEM_OBJECTS:
            if rng.random() < 0.2:
                chosen.append(f"{doc.name(name)}{doc.directive()} {toy_selection(doc, depth + 1)}")
    rng.shuffle(chosen)
    return "{ " + " ".join(doc.wrap("Item", chosen)) + " }"


def toy_document(rng: random.Random) -> tuple[str, dict[str, Any]]:
    doc = Doc(rng, [], [], [])
    roots = [
        f"{doc.name(rng.choice(('items', 'item', 'strictItem', 'laterItems')))}{doc.directive()}"
        f" {toy_selection(doc, 1)}"
        for _ in range(rng.randint(1, 2))
    ]
    body = "{ " + " ".join(doc.wrap("ToyQuery", roots)) + " }"
    declared = ", ".join(f"${n}: {t}" for n, (t, _) in doc.variables.items())
    head = f"query T({declared})" if declared else "query T"
    return " ".join([head + " " + body, *doc.fragments.values()]), doc.values()


@pytest.mark.parametrize("seed", range(6))
async def test_every_error_path_answers_the_same_bytes(seed: int) -> None:
    rng = random.Random(seed)
    errors = 0
    for _ in range(40):
        items_seed = rng.randint(0, 10**6)
        query, variables = toy_document(rng)
        answers = []
        for schema in TOY.values():
            # Fresh items per run: an awaitable attribute can be awaited once only.
            items = make_items(random.Random(items_seed), 4)
            result = await schema.execute(
                query, variable_values=variables, context_value={"items": items}
            )
            answers.append(orjson.dumps(process_result(result)))
            errors += len(result.errors or [])
            for item in items:  # awaitables nobody read: closed (no "never awaited" warning)
                _close(item)
        assert answers[0] == answers[1], f"\n{query}\n{variables}\n{answers[0]!r}\n{answers[1]!r}"
    assert errors > 40  # the error paths were taken


def _close(item: Any) -> None:
    awaited = item.awaited
    if hasattr(awaited, "close"):
        awaited.close()
    for child in item.children:
        _close(child)
