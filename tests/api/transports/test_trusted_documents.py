"""Trusted documents (transports.trusted): the operations in graphql/operations/ are registered by
SHA-256; a client may send the hash instead of the text (`documentId`, Apollo's
`extensions.persistedQuery`), a registered document skips parsing and validation, other
texts take the full path, and TRUSTED_DOCUMENTS_ONLY refuses them."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
import strawberry.schema.schema as strawberry_schema
from strawberry.extensions.parser_cache import _get_parse_cache
from strawberry.extensions.validation_cache import _get_validate_cache

from app.api.endpoint.schema import DOCUMENT_CACHE_SIZE, build_schema
from app.api.transports.trusted import MANIFEST_PATH
from app.config import get_settings
from app.operation_documents import document_id, operations, sha256_hex
from tests.api.transports.documents_http import apq, send
from tests.helpers import codes, create_post, follow, gql, make_user, sign_up
from tests.realtime.live import LiveClient
from tests.servers import ApiServer

NOT_FOUND = "PERSISTED_QUERY_NOT_FOUND"


async def by_text_and_by_hash(
    client: httpx.AsyncClient, name: str, variables: dict[str, Any], token: str | None = None
) -> list[dict[str, Any]]:
    """One operation sent as its text and in each hash form; the answers, text first."""
    text = operations()[name]
    bodies: list[dict[str, Any]] = [
        {"query": text},
        {"documentId": document_id(text)},
        {"documentId": sha256_hex(text)},  # the bare hex
        {"extensions": apq(text)},  # Apollo, hash only
        {"query": text, "extensions": apq(text)},  # Apollo, hash and text
        {"query": text, "documentId": document_id(text)},
    ]
    return [
        await send(client, {**body, "variables": variables, "operationName": name}, token)
        for body in bodies
    ]


# ---------------------------------------------------------------------------- registry


async def test_the_manifest_names_every_operation_by_its_sha256(client: httpx.AsyncClient) -> None:
    response = await client.get(MANIFEST_PATH)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    expected = {name: document_id(text) for name, text in operations().items()}
    assert response.json() == expected
    assert len(expected) >= 18  # every operation of graphql/operations/, subscription included


def test_a_document_that_does_not_validate_stops_start_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = {**operations(), "Broken": "query Broken { viewer { noSuchField } }"}
    monkeypatch.setattr("app.api.endpoint.schema.operations", lambda: broken)
    with pytest.raises(ValueError, match="Broken"):
        build_schema(get_settings())


# ---------------------------------------------------------------------------- by hash


async def test_hash_requests_answer_like_text_requests(client: httpx.AsyncClient) -> None:
    bob, bob_id = await make_user(client, "bob")
    alice = await sign_up(client, "alice")
    await follow(client, alice, "bob")
    posts = [await create_post(client, bob, f"post {i}") for i in range(3)]

    cases: list[tuple[str, dict[str, Any], str | None]] = [
        ("Viewer", {}, alice),
        ("UserProfile", {"handle": "bob", "first": 2}, alice),
        ("Post", {"id": posts[0]["id"]}, None),
        ("Feed", {"first": 2, "mode": "CHRONOLOGICAL"}, bob),
        ("LikePost", {"id": posts[1]["id"]}, alice),  # idempotent: the same answer each time
    ]
    for name, variables, token in cases:
        text, *hashed = await by_text_and_by_hash(client, name, variables, token)
        assert "errors" not in text, (name, text)
        assert text["data"], name
        for answer in hashed:
            assert answer == text, name
    assert text["data"]["likePost"]["likeCount"] == 1
    profile = (await gql(client, "UserProfile", {"handle": "bob"})).ok()
    assert profile["user"]["id"] == str(bob_id)


async def test_a_registered_document_skips_parsing_and_validation(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await sign_up(client, "alice")
    calls = {"parse": 0, "validate": 0}

    def counted(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    # Strawberry's own steps (they run when no extension did the work) ...
    monkeypatch.setattr(strawberry_schema, "parse", counted("parse", strawberry_schema.parse))
    monkeypatch.setattr(
        strawberry_schema,
        "validate_document",
        counted("validate", strawberry_schema.validate_document),
    )
    # ... and the two caches in front of them.
    parse_cache = _get_parse_cache(DOCUMENT_CACHE_SIZE)
    validate_cache = _get_validate_cache(DOCUMENT_CACHE_SIZE)

    def caches() -> tuple[int, int, int, int]:
        p, v = parse_cache.cache_info(), validate_cache.cache_info()
        return p.hits, p.misses, v.hits, v.misses

    before = caches()
    text = operations()["Viewer"]
    for body in ({"documentId": document_id(text)}, {"extensions": apq(text)}, {"query": text}):
        answer = await send(client, body, token)
        assert answer["data"]["viewer"]["handle"] == "alice"
    assert caches() == before, "a registered document went through the parser or validator"
    assert calls == {"parse": 0, "validate": 0}

    # Any other text takes the full path: parsed and validated (through the caches).
    probe = f"query Probe_{uuid.uuid4().hex} {{ viewer {{ handle }} }}"
    assert (await send(client, {"query": probe}, token))["data"]["viewer"]["handle"] == "alice"
    after = caches()
    assert after[1] == before[1] + 1 and after[3] == before[3] + 1  # one miss in each


async def test_registered_documents_keep_their_limits_and_operation_types(
    client: httpx.AsyncClient,
) -> None:
    # A mutation by hash over GET is refused like its text would be (400).
    like = operations()["LikePost"]
    response = await client.get(
        "/graphql",
        params={"documentId": document_id(like), "variables": json.dumps({"id": "1"})},
        headers={"accept": "application/json"},
    )
    assert response.status_code == 400
    # The subscription over HTTP: the usual typed error.
    updates = await send(client, {"documentId": document_id(operations()["FeedUpdates"])})
    assert codes(updates) == ["BAD_USER_INPUT"]
    # Variables are still checked per request.
    bad = await send(client, {"documentId": document_id(operations()["Post"]), "variables": {}})
    assert codes(bad) == ["BAD_USER_INPUT"]


async def test_a_query_by_hash_over_get(client: httpx.AsyncClient) -> None:
    await sign_up(client, "bob")
    text = operations()["UserProfile"]
    params = {"documentId": document_id(text), "variables": json.dumps({"handle": "bob"})}
    # `*/*` (curl's default) would get GraphiQL for a GET without `query`: not with a hash.
    response = await client.get("/graphql", params=params, headers={"accept": "*/*"})
    assert response.status_code == 200
    assert response.json()["data"]["user"]["handle"] == "bob"
    apollo = {"extensions": json.dumps(apq(text)), "variables": json.dumps({"handle": "bob"})}
    response = await client.get("/graphql", params=apollo, headers={"accept": "*/*"})
    assert response.json()["data"]["user"]["handle"] == "bob"


# ---------------------------------------------------------------------------- refusals


async def test_an_unknown_hash_is_persisted_query_not_found(client: httpx.AsyncClient) -> None:
    unknown = "{ viewer { id } }"
    for body in ({"documentId": document_id(unknown)}, {"extensions": apq(unknown)}):
        answer = await send(client, body)
        assert answer["data"] is None
        assert answer["errors"][0]["message"] == "PersistedQueryNotFound"
        assert codes(answer) == [NOT_FOUND]
    # Apollo then sends the text with its hash: it runs through the full path.
    retried = await send(client, {"query": unknown, "extensions": apq(unknown)})
    assert retried == {"data": {"viewer": None}}


async def test_a_hash_that_is_not_the_texts_is_bad_user_input(client: httpx.AsyncClient) -> None:
    viewer, feed = operations()["Viewer"], operations()["Feed"]
    mismatched = [
        {"query": viewer, "documentId": document_id(feed)},
        {"query": viewer, "extensions": apq(feed)},
        {"query": "{ viewer { id } }", "extensions": apq(viewer)},
        {"documentId": document_id(viewer), "extensions": apq(feed)},
        {"documentId": "sha256:not-hex"},
        {"documentId": 42},
        {"extensions": {"persistedQuery": {"version": 2, "sha256Hash": sha256_hex(viewer)}}},
    ]
    for body in mismatched:
        answer = await send(client, body)
        assert answer["data"] is None, body
        assert codes(answer) == ["BAD_USER_INPUT"], (body, answer)


async def test_no_query_and_no_hash_is_still_a_400(client: httpx.AsyncClient) -> None:
    response = await client.post("/graphql", json={"variables": {}})
    assert response.status_code == 400


async def test_the_schema_itself_refuses_unregistered_texts_when_trusted_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever transport calls the schema, TRUSTED_DOCUMENTS_ONLY holds (the extension)."""
    monkeypatch.setattr(get_settings(), "trusted_documents_only", True)
    schema = build_schema(get_settings())
    refused = await schema.execute("{ __typename }")
    assert refused.data is None
    assert refused.errors and refused.errors[0].extensions == {"code": "BAD_USER_INPUT"}
    assert "only registered documents" in refused.errors[0].message.lower()
    # A registered text runs (here up to its missing variable: no resolver needs a context).
    accepted = await schema.execute(operations()["Post"])
    assert accepted.errors and "$id" in accepted.errors[0].message


# ---------------------------------------------------------------------------- a real server


async def test_trusted_only_refuses_unregistered_texts_and_runs_registered_ones(
    trusted_server: ApiServer,
) -> None:
    async with trusted_server.http() as http:
        token = await sign_up(http, "alice")  # gql sends the registered text
        viewer = operations()["Viewer"]
        for body in ({"query": viewer}, {"documentId": document_id(viewer)}):
            answer = await send(http, body, token)
            assert answer["data"]["viewer"]["handle"] == "alice", body
        for text in ("{ viewer { handle } }", viewer + "\n"):  # not byte for byte registered
            refused = await send(http, {"query": text}, token)
            assert refused["data"] is None
            assert codes(refused) == ["BAD_USER_INPUT"]
            assert "only registered documents" in refused["errors"][0]["message"].lower()
        # With its (correct) hash too: a text the server does not hold is still refused.
        other = "{ viewer { id } }"
        refused = await send(http, {"query": other, "extensions": apq(other)}, token)
        assert codes(refused) == ["BAD_USER_INPUT"]
        # GraphiQL's schema introspection is an unregistered text as well.
        introspection = await send(http, {"query": "{ __schema { queryType { name } } }"})
        assert codes(introspection) == ["BAD_USER_INPUT"]


async def _next_message(live: LiveClient) -> dict[str, Any]:
    while True:
        message = json.loads(await asyncio.wait_for(live.ws.recv(), 5))
        if message["type"] == "ping":
            await live.ws.send(json.dumps({"type": "pong"}))
            continue
        return dict(message)


async def test_a_subscription_by_document_id_over_the_websocket(
    trusted_server: ApiServer,
) -> None:
    async with trusted_server.http() as http:
        token = await sign_up(http, "alice")
    live = await LiveClient.open(trusted_server, token, subscribe=False)
    try:
        updates = operations()["FeedUpdates"]

        async def subscribe(op_id: str, payload: dict[str, Any]) -> dict[str, Any]:
            await live.ws.send(json.dumps({"id": op_id, "type": "subscribe", "payload": payload}))
            message = await _next_message(live)
            assert message["id"] == op_id
            return message

        unknown = await subscribe("1", {"documentId": document_id("subscription X { a }")})
        assert unknown["type"] == "error"
        assert unknown["payload"][0]["extensions"]["code"] == NOT_FOUND
        assert unknown["payload"][0]["message"] == "PersistedQueryNotFound"

        refused = await subscribe("2", {"query": "subscription { feedUpdates { newPostCount } }"})
        assert refused["type"] == "error"
        assert refused["payload"][0]["extensions"]["code"] == "BAD_USER_INPUT"

        mismatched = await subscribe("3", {"query": updates, "extensions": apq("{ a }")})
        assert mismatched["payload"][0]["extensions"]["code"] == "BAD_USER_INPUT"

        # The socket is still open: the registered document by hash runs.
        first = await subscribe("4", {"documentId": document_id(updates)})
        assert first["type"] == "next", first
        assert first["payload"]["data"]["feedUpdates"]["newPostCount"] == 0
        apollo = await subscribe("5", {"extensions": apq(updates)})
        assert apollo["type"] == "next", apollo
        # graphql-ws clients must send a string `query`: an empty one goes with a hash.
        empty = await subscribe("6", {"query": "", "documentId": document_id(updates)})
        assert empty["type"] == "next", empty
    finally:
        await live.close()


async def test_live_updates_reach_a_subscription_made_by_hash(
    trusted_server: ApiServer, pipeline: Any
) -> None:
    async with trusted_server.http() as http:
        author = await sign_up(http, "author")
        fan = await sign_up(http, "fan")
        await follow(http, fan, "author")
        await pipeline.settle()
        live = await LiveClient.open(trusted_server, fan, subscribe=False)
        try:
            payload = {"documentId": document_id(operations()["FeedUpdates"])}
            await live.ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
            assert (await live.next_update(5))["newPostCount"] == 0
            await create_post(http, author, "hello fans")
            await pipeline.settle()
            assert (await live.until_count(1))[-1]["newPostCount"] == 1
        finally:
            await live.close()
