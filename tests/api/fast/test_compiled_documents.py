"""Compiled documents (app.api.fast.compiler, .compiled_http) answer the regular path's bytes.

Differential tests, as tests/api/fast/test_fast_execution.py does for the executor:
- random documents over `feed` that the compiler can plan (aliases, named and inline
  fragments, __typename, authors, likes, page info; arguments as literals, variables with and
  without defaults, absent), compiled and run next to graphql-core's executor on the same
  page, on a random social graph, again after each round of likes, comments, edits,
  visibility changes, deletes, blocks, follows and display-name changes; errors included
  (no token, a bad `first`, a foreign or broken cursor);
- the app over HTTP with COMPILED_DOCUMENTS on and off, the registered Feed document sent by
  documentId, by Apollo's hash and as its text, with good and bad variables, tokens, Accept
  headers and operation names: status, Content-Type and body equal, and the compiled path
  taken for every request it should take (graphql_compiled_total);
- what the compiler leaves to the regular path (directives, arguments below the root,
  fields it cannot plan, a response key twice but the same leaf), and what clients add
  that it plans (`__typename` beside the root field, the same leaf twice);
- documents sent as unregistered text (TextPlans): planned on the second sighting, bounded,
  refusals remembered; over HTTP with text plans on, off and compiled documents off, the
  same bytes.

A first page makes a new session on every read: within one comparison the page is read once
and replayed to the other path (tests/api/fast/differential.py's `replayed_pages`).
"""

from __future__ import annotations

import random
import re
from typing import Any

import httpx
import orjson
import pytest
from strawberry.http import process_result

from app.api.endpoint.schema import build_schema
from app.api.fast.compiled_http import COMPILED, FALLBACK
from app.api.fast.compiler import MIRRORED_EXTENSIONS, compile_documents, extension_names
from app.api.fast.text_plans import TEXT_LABEL, TextPlans
from app.api.schema.context import Context
from app.api.transports.document_limits import MAX_TOKENS
from app.api.transports.trusted import Registered
from app.config import get_settings
from app.operation_documents import sha256_hex
from tests.api.fast import differential
from tests.api.fast.differential import (
    PLAIN,
    Gen,
    World,
    build_world,
    change,
    compile_text,
    end_cursors,
    feed_with_media,
    gql_text,
    pinned_media_clock,
    replayed_pages,
)
from tests.helpers import app_client, gql, make_user, sql


async def compare_compiled(state: Any, world: World, documents: int) -> None:
    rng = world.rng
    for _ in range(documents):
        viewer = rng.choice([*world.handles, None])
        viewer_id = world.ids[viewer] if viewer else None
        cursors = await end_cursors(state, viewer_id) if viewer_id else []
        text, variables = Gen(rng, cursors).document()
        compiled = compile_text(text)
        assert compiled is not None, text
        values = {k: compiled.variables[k].coerce(v) for k, v in variables.items()}
        with replayed_pages(state), pinned_media_clock():
            context = Context(state=state, request=None, viewer_id=viewer_id)
            plain = await PLAIN.execute(text, variable_values=variables, context_value=context)
            expected = orjson.dumps(process_result(plain))
            context = Context(state=state, request=None, viewer_id=viewer_id)
            got = orjson.dumps(await compiled.execute(context, values))
        assert got == expected, f"\n{text}\n{variables}\nviewer {viewer}\n{got!r}\n{expected!r}"
        world.compared += 1
        world.with_posts += b'"node":{' in expected or b'"id":"' in expected
        world.with_errors += b'"errors":[' in expected
        world.with_images += expected.count(b"/media/m-")  # media URLs (the local store's)


async def test_random_compiled_documents_answer_the_same_bytes(client, state, pipeline) -> None:
    world = await build_world(client, pipeline, seed=2024, images=True)
    await compare_compiled(state, world, documents=60)
    for round_no in range(6):
        for _ in range(3):
            await change(client, state, world)
        if round_no % 2:
            await pipeline.settle()
        await compare_compiled(state, world, documents=20)
    assert world.compared == 60 + 6 * 20
    assert world.with_posts > world.compared // 3
    assert world.with_errors > 5
    assert world.with_images > 20  # media compared: their URLs, sizes, types and alt texts


@pytest.mark.parametrize(
    "text",
    [
        "query { feed { edges { node { id @include(if: true) } } } }",  # a directive
        "query { feed { edges { node { author { viewerFollows } } } } }",  # not planned
        "query { feed { edges { node { comments { edges { cursor } } } } } }",  # arguments
        "query { feed { pageInfo { hasNextPage } pageInfo { endCursor } } }",  # merging
        "query { feed { d: degraded d: sessionId } }",  # a key twice, two fields
        "query { feed { degraded } viewer { id } }",  # two root fields
        "query { viewer { id } }",  # another root field
        "query($n: Int!) { feed(first: $n) { degraded } }",  # a non-null variable
        # Two operations (graphql-core wants an operationName; the regular path decides).
        "query A { feed { degraded } } query B { feed { degraded } }",
    ],
)
def test_what_the_compiler_leaves_to_the_regular_path(text: str) -> None:
    assert compile_text(text) is None


@pytest.mark.parametrize(
    "text",
    [
        # What clients add (Apollo's __typenames; the client preset's also beside the root).
        "query { __typename feed { degraded } }",
        "query { feed { degraded degraded } }",  # the same leaf twice: one
        "query { feed { edges { node { __typename ...P } } } } "
        "fragment P on Post { __typename id }",
    ],
)
def test_what_clients_add_compiles(text: str) -> None:
    assert compile_text(text) is not None


def test_the_registered_feed_document_compiles() -> None:
    assert compile_text(gql_text("Feed")) is not None


# -- over HTTP -------------------------------------------------------------------------------


def _compiled_count() -> float:
    return COMPILED.labels("Feed")._value.get()


async def _post(client: httpx.AsyncClient, payload: Any, headers: dict[str, str]) -> Any:
    content = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    response = await client.post("/graphql", content=content, headers=headers)
    return response.status_code, response.headers.get("content-type"), response.content


async def test_http_answers_equal_the_regular_path(client, state, pipeline) -> None:
    world = await build_world(client, pipeline, seed=99, images=True)
    viewer = "bob"
    token = world.tokens[viewer]
    cursors = await end_cursors(state, world.ids[viewer])
    logged_out, _ = await make_user(client, "leaver")
    (await gql(client, "LogOut", token=logged_out)).ok()
    text = gql_text("Feed")
    digest = sha256_hex(text)
    rng = random.Random(7)
    bodies = [
        lambda v: {"query": text, "variables": v},
        lambda v: {"query": text, "variables": v, "operationName": "Feed"},
        lambda v: {"documentId": f"sha256:{digest}", "variables": v},
        lambda v: {
            "extensions": {"persistedQuery": {"version": 1, "sha256Hash": digest}},
            "variables": v,
        },
        lambda v: {"query": text, "variables": v, "operationName": "Other"},  # regular
        lambda v: {"query": text, "variables": v, "surprise": 1},  # regular: unknown key
        lambda v: {"query": text + SECOND_OPERATION, "variables": v},  # regular: refused
        lambda v: {"query": text + SECOND_OPERATION, "variables": v, "operationName": "Feed"},
    ]
    variables: list[Any] = [
        {},
        None,
        {"first": 5},
        {"first": 5, "mode": "CHRONOLOGICAL"},
        {"first": None, "mode": None},
        {"first": 3, "after": rng.choice(cursors)},
        {"first": 3, "after": "garbage"},
        {"first": 0},
        {"first": 101},
        {"first": "5"},  # regular: does not coerce
        {"first": 2.0},  # regular
        {"first": 2**40},  # regular
        {"mode": "SIDEWAYS"},  # regular
        {"after": "a\x00b"},  # regular: NUL
        {"unknown": 1},  # regular
        [],  # regular: not an object
    ]
    tokens = [token, None, "garbage", logged_out]
    accepts = [None, "application/json", "application/graphql-response+json", "*/*",
               "application/graphql-response+json, application/json;q=0.9",
               "multipart/mixed, application/json"]  # fmt: skip
    content_types = ["application/json", "application/json; charset=utf-8", "text/plain"]
    before = _compiled_count()
    took = 0
    async with app_client(state, compiled_documents=False) as regular:
        for _ in range(200):
            vars_ = rng.choice(variables)
            body = rng.choice(bodies)(vars_)
            headers = {"content-type": rng.choice(content_types)}
            who = rng.choice(tokens)
            if who:
                headers["authorization"] = f"Bearer {who}"
            accept = rng.choice(accepts)
            if accept:
                headers["accept"] = accept
            with replayed_pages(state), pinned_media_clock():
                count = _compiled_count()
                ours = await _post(client, body, headers)
                took += _compiled_count() > count
                theirs = await _post(regular, body, headers)
            assert ours == theirs, (body, headers)
    assert _compiled_count() - before == took
    assert took > 30, took  # the plain cases went the compiled way


def _compiled_total() -> float:
    return sum(s.value for m in COMPILED.collect() for s in m.samples if s.name.endswith("_total"))


async def test_http_pages_with_images_equal_the_regular_path(client, state, pipeline) -> None:
    # The Feed document with Post.media (registered, or a text planned on its second
    # sighting): each viewer's pages, compiled and regular, before and after changes.
    world = await build_world(client, pipeline, seed=36, images=True)
    text = feed_with_media()
    images = took = sent = 0
    async with app_client(state, compiled_documents=False) as regular:
        for _ in range(3):
            for viewer in world.handles:
                headers = {
                    "authorization": f"Bearer {world.tokens[viewer]}",
                    "content-type": "application/json",
                }
                mode = world.rng.choice(("RANKED", "CHRONOLOGICAL"))
                body = {"query": text, "variables": {"first": 20, "mode": mode}}
                with replayed_pages(state), pinned_media_clock():
                    count = _compiled_total()
                    ours = await _post(client, body, headers)
                    took += _compiled_total() > count
                    theirs = await _post(regular, body, headers)
                assert ours == theirs, (viewer, ours, theirs)
                images += ours[2].count(b"/media/m-")
                sent += 1
            for _ in range(4):
                await change(client, state, world)
            await pipeline.settle()
    assert images > 20, images  # pages with images were compared
    assert took >= sent - 1, (took, sent)  # all but a text's first sighting compiled


SECOND_OPERATION = "\nquery Other { viewer { id } }"


async def test_a_second_operation_needs_a_name_on_every_path(client, state, pipeline) -> None:
    """The registered Feed document with another operation after it is no registered
    document: without `operationName` it is refused as graphql-core refuses it, by POST with
    compiled documents on and off and by GET; named, each operation runs."""
    world = await build_world(client, pipeline, seed=3)
    token = world.tokens["bob"]
    text = gql_text("Feed") + SECOND_OPERATION
    expected = [(m, "BAD_USER_INPUT") for m in differential.graphql_core_refusal(text)]
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    async with app_client(state, compiled_documents=False) as regular:
        for http in (client, regular):
            status, _, body = await _post(http, {"query": text, "variables": {"first": 2}}, headers)
            assert status == 200 and differential.refusal_of(orjson.loads(body)) == expected
            got = await http.get("/graphql", params={"query": text}, headers=headers)
            assert differential.refusal_of(got.json()) == expected
            named = {"query": text, "operationName": "Other"}
            ran = await _post(http, named, headers)
            assert orjson.loads(ran[2]) == {"data": {"viewer": {"id": str(world.ids["bob"])}}}
            with replayed_pages(state):
                feed = await _post(http, {**named, "operationName": "Feed"}, headers)
            assert orjson.loads(feed[2])["data"]["feed"]["edges"], feed


async def test_read_budget_refusals_are_the_same(state, pipeline) -> None:
    """A refused read (the per-user budget) answers as Strawberry reports an extension's
    error: no path, and under graphql-response+json a 400 without data."""
    from app import ratelimit

    token, _ = await make_user_direct(state)
    text = gql_text("Feed")
    answers = {}
    with replayed_pages(state):  # one session for both
        for compiled in (True, False):
            ratelimit.forget_local()
            await state.redis.flushdb()
            async with app_client(
                state, compiled_documents=compiled, rate_limit_reads_per_minute=2
            ) as c:
                for accept in ("application/json", "application/graphql-response+json"):
                    headers = {
                        "authorization": f"Bearer {token}",
                        "accept": accept,
                        "content-type": "application/json",
                    }
                    answers[compiled, accept] = [
                        await _post(c, {"query": text, "variables": {"first": 1}}, headers)
                        for _ in range(2)
                    ]
    for accept in ("application/json", "application/graphql-response+json"):
        # The wait left in the window moves with the clock between the two runs.
        assert _no_wait(answers[True, accept]) == _no_wait(answers[False, accept])
    refused = answers[True, "application/graphql-response+json"][-1]
    assert refused[0] == 400 and b"RATE_LIMITED" in refused[2] and b'"data"' not in refused[2]


def _no_wait(answers: list[Any]) -> list[Any]:
    return [
        (status, media, re.sub(rb"(Retry in |\"retryAfter\":)\d+", rb"\1N", body))
        for status, media, body in answers
    ]


async def make_user_direct(state: Any) -> tuple[str, int]:
    from app.auth.tokens import issue_token

    rows = await sql(
        "INSERT INTO users (handle, password_hash, display_name, last_active_at)"
        " VALUES ('reader', '!', 'Reader', now()) RETURNING id"
    )
    return issue_token(state.settings, int(rows[0]["id"])), int(rows[0]["id"])


# -- what the compiled path must know about the schema, and its run-time fallback ------------


def test_the_compiled_path_mirrors_every_extension_of_the_schema() -> None:
    """A new schema extension (a limit, a cache, a check) runs on the regular path only: the
    compiled path must say what it does in its place (MIRRORED_EXTENSIONS) or it would skip
    it silently. This fails until it does."""
    assert sorted(extension_names(build_schema(get_settings()))) == sorted(MIRRORED_EXTENSIONS)


def test_a_schema_with_an_extension_it_does_not_mirror_compiles_nothing() -> None:
    from graphql import parse
    from strawberry.extensions import SchemaExtension

    class Audit(SchemaExtension):
        pass

    schema = build_schema(get_settings())
    text = gql_text("Feed")
    entry = Registered("Feed", text, sha256_hex(text), parse(text))
    assert compile_documents(schema._schema, {text: entry}, schema.process_errors)
    schema.extensions = [*schema.extensions, Audit]
    assert compile_documents(schema._schema, {text: entry}, schema.process_errors) == {}


def _fallbacks() -> float:
    return FALLBACK.labels("Feed")._value.get()


async def test_a_value_the_plan_cannot_render_is_answered_by_the_regular_path(
    client, state, pipeline
) -> None:
    """A like count past GraphQL's Int (a 32-bit column cannot hold one today; a bigint one
    or a bug could) is a value the plan cannot render at run time: the request goes to the
    regular path, which answers graphql-core's field error with its nulls. It used to become
    the compiled path's INTERNAL error on `feed`."""
    world = await build_world(client, pipeline, seed=11)
    headers = {
        "authorization": f"Bearer {world.tokens['bob']}",
        "content-type": "application/json",
    }
    body = {"query": gql_text("Feed"), "variables": {"first": 5}}
    with replayed_pages(state):
        replay = state.feed.page

        async def page(*args: Any, **kwargs: Any) -> Any:
            read = await replay(*args, **kwargs)
            # In the rows, which both renders read (a row plan builds no FeedPost).
            read.rows = [(row._replace(likes=2**31), at) for row, at in read.rows]
            return read

        state.feed.page = page
        compiled, fallbacks = _compiled_count(), _fallbacks()
        ours = await _post(client, body, headers)
        assert (_compiled_count(), _fallbacks()) == (compiled, fallbacks + 1)
        async with app_client(state, compiled_documents=False) as regular:
            theirs = await _post(regular, body, headers)
    assert ours == theirs
    errors = orjson.loads(ours[2])["errors"]
    assert errors and all(e["extensions"]["code"] == "BAD_USER_INPUT" for e in errors), errors
    assert "Int cannot represent" in errors[0]["message"]
    assert errors[0]["path"][:3] == ["feed", "edges", 0], errors[0]


# graphql-core's variable coercion cases (tests/execution/test_variables.py, for the input
# types a compiled document's variables can have): the plan must accept a value only where
# graphql-core accepts it, with the same value; what it refuses goes to the regular path.
VARIABLE_VALUES: list[Any] = [
    0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 1.0, 1.5, float("nan"), "1", "",
    "abc", "RANKED", "ranked", "SIDEWAYS", True, False, None, [], [1], {}, {"a": 1},
]  # fmt: skip


@pytest.mark.parametrize("type_name", ["Int", "String", "Boolean", "FeedMode"])
def test_compiled_variables_coerce_as_graphql_core_does(type_name: str) -> None:
    from graphql import coerce_input_value

    from app.api.fast import coercion

    schema = PLAIN._schema
    graphql_type = schema.get_type(type_name)
    assert graphql_type is not None
    coerce = coercion._nullable(coercion._input(schema, type_name))
    members = getattr(graphql_type, "wrapped_cls", None)
    accepted = 0
    for value in VARIABLE_VALUES:
        try:
            ours = coerce(value)
        except ValueError:
            continue  # left to the regular path
        theirs = coerce_input_value(value, graphql_type)  # raises where graphql-core refuses
        if members is not None and theirs is not None:
            theirs = members(theirs)
        assert type(ours) is type(theirs) and ours == theirs, (type_name, value, ours, theirs)
        accepted += 1
    assert accepted >= 2, type_name


# -- documents sent as unregistered text (TextPlans, decision 0045) ---------------------------


def _text_count() -> float:
    return COMPILED.labels(TEXT_LABEL)._value.get()


def _text_plans(entries: int = 4, max_chars: int = 10_000) -> TextPlans:
    registry = build_schema(get_settings()).documents
    return TextPlans(
        PLAIN._schema, registry.rules, MAX_TOKENS, PLAIN.process_errors, entries, max_chars
    )


def test_a_text_is_planned_on_its_second_sighting_and_kept() -> None:
    plans = _text_plans()
    text = " ".join(gql_text("Feed").split())  # the Feed query, not its registered text
    assert plans.get(text) is None and plans.planned == 0  # first sighting: remembered only
    plan = plans.get(text)
    assert plan is not None and plans.planned == 1
    assert plans.get(text) is plan and plans.planned == 1  # planned once


def test_texts_the_regular_path_must_judge_are_remembered_as_such() -> None:
    plans = _text_plans()
    refused = [
        "query { feed { nope } }",  # does not validate
        "query { feed { degraded }",  # does not parse
        "query { feed { edges { node { id @include(if: true) } } } }",  # not planned
        "query { feed { degraded } } query B { feed { degraded } }",  # two operations
        "query { feed(first: 1) { " + "degraded " * 1100 + "} }",  # the token limit
    ]
    for text in refused:
        assert plans.get(text) is None and plans.get(text) is None
    assert plans.planned == len(refused)
    for text in refused:
        assert plans.get(text) is None  # remembered: not planned again
    assert plans.planned == len(refused)


def test_the_bounds_keep_a_flood_of_distinct_texts_cheap() -> None:
    plans = _text_plans(entries=4, max_chars=200)
    kept = "query { feed { degraded } }"
    plans.get(kept)
    plan = plans.get(kept)
    assert plan is not None
    for n in range(1000):  # each sent once: a doorkeeper insert, no planning, no eviction
        assert plans.get(f"query {{ feed {{ degraded a{n}: sessionId }} }}") is None
    assert plans.planned == 1 and plans.get(kept) is plan
    assert len(plans._seen) <= 4
    long = "query { feed { degraded } }" + " " * 200  # past max_chars: never planned
    assert plans.get(long) is None and plans.get(long) is None and plans.planned == 1
    other = "query { viewer { id } }"  # no root the compiler plans: not even remembered
    assert plans.get(other) is None and plans.get(other) is None and plans.planned == 1
    for n in range(6):  # sent twice each: planned, and the LRU keeps the 4 newest
        text = f"query {{ feed {{ b{n}: degraded }} }}"
        plans.get(text)
        assert plans.get(text) is not None
    assert len(plans) == 4 and plans.planned == 7
    assert plans.get(kept) is None  # evicted: its next sighting starts over
    assert _text_plans(entries=0).get(kept) is None


async def test_text_sent_documents_answer_the_same_bytes(client, state, pipeline) -> None:
    """Unregistered texts (the Feed query reformatted, random plannable documents, and texts
    the regular path refuses) over HTTP: text plans on (the default), off, and compiled
    documents off answer the same status, media type and body; the plans are taken."""
    world = await build_world(client, pipeline, seed=31)
    token = world.tokens["bob"]
    cursors = await end_cursors(state, world.ids["bob"])
    rng = random.Random(11)
    feed = " ".join(gql_text("Feed").split())
    texts: list[tuple[str, list[Any]]] = [
        (feed, [{}, {"first": 5, "mode": "CHRONOLOGICAL"}, {"first": 0}, {"first": "5"}]),
        ("# from GraphiQL\n" + gql_text("Feed"), [{"first": 3, "after": rng.choice(cursors)}]),
        ("query { feed { nope } }", [{}]),
        ("query { feed { degraded }", [{}]),
        ("query Q { feed { degraded } } query R { feed { sessionId } }", [{}]),
    ]
    for _ in range(12):
        text, values = Gen(rng, cursors).document()
        texts.append((text, [values]))
    before = _text_count()
    took = 0
    async with (
        app_client(state, compiled_text_plans=0) as no_texts,
        app_client(state, compiled_documents=False) as regular,
    ):
        for _ in range(240):
            text, choices = rng.choice(texts)
            body: dict[str, Any] = {"query": text, "variables": rng.choice(choices)}
            if rng.random() < 0.2:
                body["operationName"] = rng.choice(["Q", "Feed", "R"])
            headers = {"content-type": "application/json"}
            if rng.random() < 0.9:
                headers["authorization"] = f"Bearer {token}"
            with replayed_pages(state):
                count = _text_count()
                ours = await _post(client, body, headers)
                took += _text_count() > count
                off = await _post(no_texts, body, headers)
                theirs = await _post(regular, body, headers)
            assert ours == theirs, (body, headers)
            assert off == theirs, (body, headers)
    assert _text_count() - before == took
    assert took > 100, took  # every plannable text after its first sighting
