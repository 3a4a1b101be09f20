"""graphql-transport-ws edge cases against a real uvicorn, with raw websocket messages: what
a conforming client may send and what the server must answer (PROTOCOL.md of graphql-ws),
plus this API's own socket rules: fresh state per operation, token expiry, a size limit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.helpers import follow, gql, make_user, post
from tests.realtime.live import (
    FEED_UPDATES,
    authed,
    closed_with,
    open_socket,
    receive,
    run_query,
    send,
    two_frames,
)
from tests.servers import ApiServer

POST_QUERY = "query Post($id: ID!) { post(id: $id) { id body } }"


@pytest.fixture
async def user(server: ApiServer) -> AsyncIterator[str]:
    async with server.http() as http:
        token, _ = await make_user(http, "sock")
    yield token


async def test_frames_are_text_and_ping_pong_works_both_ways(server: ApiServer, user) -> None:
    ws = await authed(server, user)
    await send(ws, {"type": "ping", "payload": {"at": 1}})
    assert (await receive(ws))["type"] == "pong"
    await send(ws, {"type": "pong"})  # unsolicited pongs are allowed (a heartbeat)
    await send(ws, {"id": "1", "type": "subscribe", "payload": {"query": FEED_UPDATES}})
    first = await receive(ws)
    assert first["type"] == "next" and first["payload"]["data"]["feedUpdates"]["newPostCount"] == 0
    await ws.close()


async def test_complete_from_the_client_stops_the_stream(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        fan, _ = await make_user(http, "fan")
        await follow(http, fan, "author")
        await pipeline.settle()
        ws = await authed(server, fan)
        await send(ws, {"id": "a", "type": "subscribe", "payload": {"query": FEED_UPDATES}})
        assert (await receive(ws))["id"] == "a"
        await send(ws, {"id": "a", "type": "complete"})
        await post(http, author, "after complete")
        await pipeline.settle()
        with pytest.raises(TimeoutError):
            await receive(ws, 0.6)
        # The id is free again after complete.
        await send(ws, {"id": "a", "type": "subscribe", "payload": {"query": FEED_UPDATES}})
        again = await receive(ws)
        assert again["id"] == "a" and again["payload"]["data"]["feedUpdates"]["newPostCount"] == 1
        await ws.close()


async def test_the_server_completes_a_query_operation(server: ApiServer, user) -> None:
    ws = await authed(server, user)
    payload = await run_query(ws, "q", "{ viewer { handle } }", {})
    assert payload == {"data": {"viewer": {"handle": "sock"}}}
    await ws.close()


@pytest.mark.parametrize(
    ("messages", "code"),
    [
        # duplicate operation id
        (
            [
                {"id": "1", "type": "subscribe", "payload": {"query": FEED_UPDATES}},
                {"id": "1", "type": "subscribe", "payload": {"query": FEED_UPDATES}},
            ],
            4409,
        ),
        ([{"type": "shout"}], 4400),  # unknown message type
        ([{"id": "1"}], 4400),  # no type
        ([{"id": "1", "type": "subscribe", "payload": "x"}], 4400),  # payload not an object
        ([{"type": "connection_init"}], 4429),  # second connection_init
    ],
)
async def test_protocol_violations_close_with_their_codes(
    server: ApiServer, user, messages: list[dict[str, Any]], code: int
) -> None:
    ws = await authed(server, user)
    for message in messages:
        await send(ws, message)
    assert (await closed_with(ws))[0] == code


async def test_non_json_and_non_object_messages_close_4400(server: ApiServer, user) -> None:
    for raw in ("not json", "[1, 2]", "42"):
        ws = await authed(server, user)
        await ws.send(raw)
        assert (await closed_with(ws))[0] == 4400, raw


async def test_operations_before_ack_close_4401(server: ApiServer) -> None:
    ws = await open_socket(server)
    await send(ws, {"id": "1", "type": "subscribe", "payload": {"query": FEED_UPDATES}})
    assert (await closed_with(ws))[0] == 4401


async def test_refusals_say_what_to_send(server: ApiServer) -> None:
    cases = [
        ({}, "Authorization"),
        ({"authorization": "Bearer not-a-token"}, "not valid"),
        ({"AUTHORIZATION": "Basic x"}, "Bearer"),
    ]
    for payload, hint in cases:
        ws = await open_socket(server)
        await send(ws, {"type": "connection_init", "payload": payload})
        code, reason = await closed_with(ws)
        assert code == 4403, payload
        assert hint in reason, (payload, reason)


async def test_authorization_key_in_any_letter_case(server: ApiServer, user) -> None:
    for key in ("authorization", "Authorization", "AUTHORIZATION"):
        ws = await open_socket(server)
        await send(ws, {"type": "connection_init", "payload": {key: f"Bearer {user}"}})
        assert (await receive(ws))["type"] == "connection_ack", key
        await ws.close()


async def test_no_connection_init_in_time_closes_4408(test_database: str) -> None:
    api = await ApiServer(env={"REALTIME_CONNECTION_INIT_TIMEOUT_SECONDS": "0.5"}).start()
    try:
        ws = await open_socket(api)
        code, _ = await closed_with(ws, 3)
        assert code == 4408
    finally:
        api.stop()


async def test_an_expired_token_ends_the_socket_with_4403(test_database: str) -> None:
    api = await ApiServer(env={"TOKEN_TTL_SECONDS": "2"}).start()
    try:
        async with api.http() as http:
            token, _ = await make_user(http, "brief")
        ws = await authed(api, token)
        await send(ws, {"id": "1", "type": "subscribe", "payload": {"query": FEED_UPDATES}})
        assert (await receive(ws))["type"] == "next"
        code, reason = await closed_with(ws, 5)
        assert code == 4403 and "expired" in reason
        # And a new socket with that token is refused.
        ws = await open_socket(api)
        await send(ws, {"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
        code, reason = await closed_with(ws)
        assert code == 4403 and "expired" in reason
    finally:
        api.stop()


async def test_a_message_over_the_body_limit_closes_1009(server: ApiServer, user) -> None:
    ws = await authed(server, user)
    padding = "#" * (64 * 1024)
    query = "{ viewer { handle } }\n" + padding
    await send(ws, {"id": "big", "type": "subscribe", "payload": {"query": query}})
    code, reason = await closed_with(ws)
    assert code == 1009 and "65536" in reason
    # Just under the limit is still served (comments are ignored by the parser).
    ws = await authed(server, user)
    small = "{ viewer { handle } }\n#" + "x" * 1000
    assert (await run_query(ws, "ok", small, {}))["data"] == {"viewer": {"handle": "sock"}}
    await ws.close()


async def test_each_operation_sees_current_data(server: ApiServer, pipeline) -> None:
    """A query repeated over one socket answers from the database each time, never from the
    previous operation's DataLoader cache: deletions, privacy changes and blocks show."""
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        viewer, _ = await make_user(http, "viewer")
        await follow(http, viewer, "author")
        ids = [await post(http, author, f"post {i}") for i in range(3)]
        ws = await authed(server, viewer)
        for n, post_id in enumerate(ids):
            payload = await run_query(ws, f"before{n}", POST_QUERY, {"id": str(post_id)})
            assert payload["data"]["post"]["id"] == str(post_id)

        (await gql(http, "DeletePost", {"id": str(ids[0])}, token=author)).ok()
        (
            await gql(
                http,
                "SetPostVisibility",
                {"id": str(ids[1]), "visibility": "PRIVATE"},
                token=author,
            )
        ).ok()
        assert (await run_query(ws, "deleted", POST_QUERY, {"id": str(ids[0])}))["data"] == {
            "post": None
        }
        assert (await run_query(ws, "private", POST_QUERY, {"id": str(ids[1])}))["data"] == {
            "post": None
        }
        (await gql(http, "Block", {"handle": "viewer"}, token=author)).ok()
        assert (await run_query(ws, "blocked", POST_QUERY, {"id": str(ids[2])}))["data"] == {
            "post": None
        }
        await ws.close()


async def test_a_subscription_over_http_is_a_typed_error(server: ApiServer, user) -> None:
    async with server.http() as http:
        result = await gql(http, "FeedUpdates", token=user)
    assert result.status == 200
    assert result.codes == ["BAD_USER_INPUT"]
    assert "websocket" in result.errors[0]["message"]
    assert result.data is None


async def test_prepared_frames_are_byte_identical_to_strawberrys(
    test_database: str, pipeline
) -> None:
    """The per-frame fast path (app.api.fast.live_frames), written raw to the transport (no
    compression negotiated) and through the ASGI send (permessage-deflate negotiated), against
    Strawberry's own per-event execution, for a document with aliases, __typename, a fragment
    and a variable directive."""
    document = """
        subscription Live($withTime: Boolean!) {
          feedUpdates { __typename n: newPostCount ...Times @include(if: $withTime) }
        }
        fragment Times on FeedUpdate { latestPostAt at: latestPostAt }
    """
    no_deflate = ["--ws-per-message-deflate", "false"]
    servers = [
        await ApiServer(env={"REALTIME_PREPARED_FRAMES": "1"}, args=no_deflate).start(),
        await ApiServer(env={"REALTIME_PREPARED_FRAMES": "1"}).start(),
        await ApiServer(env={"REALTIME_PREPARED_FRAMES": "0"}).start(),
    ]
    try:
        async with servers[0].http() as http:
            author, _ = await make_user(http, "author")
            fans = [await make_user(http, f"fan{i}") for i in range(len(servers))]
            for token, _ in fans:
                await follow(http, token, "author")
            await pipeline.settle()
            sockets = []
            for server, (token, _) in zip(servers, fans, strict=True):
                ws = await open_socket(server)
                init = {"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}}
                await send(ws, init)
                assert (await receive(ws))["type"] == "connection_ack"
                sockets.append(ws)
            for ws in sockets:
                for op_id, flag in (("t", True), ("f", False)):
                    payload = {"query": document, "variables": {"withTime": flag}}
                    await send(ws, {"id": op_id, "type": "subscribe", "payload": payload})
            frames: list[list[str]] = [[] for _ in servers]
            for i, ws in enumerate(sockets):
                frames[i] += await two_frames(ws)
            for n in range(3):
                await post(http, author, f"post {n}")
                await pipeline.settle()
                for i, ws in enumerate(sockets):
                    frames[i] += await two_frames(ws)
            raw, asgi, stock = frames
            assert raw == stock
            assert asgi == stock
            assert json.loads(raw[-1])["payload"]["data"]["feedUpdates"]["n"] >= 1
            for ws in sockets:
                await ws.close()
        written = "feed_realtime_prepared_frames_total"
        assert await servers[0].metric(written, 'write="raw"') == 8
        assert await servers[1].metric(written, 'write="asgi"') == 8
        assert await servers[2].metric(written, 'write="raw"') == 0
    finally:
        for s in servers:
            s.stop()


# -- conformance: what HTTP refuses, the socket refuses alike (issue 19) --------------------

BAD_DOCUMENTS = [
    ("syntax error", {"query": "{ viewer {"}),
    ("unknown field", {"query": "{ nope }"}),
    ("variable of the wrong type", {"query": POST_QUERY, "variables": {"id": {"x": 1}}}),
    ("missing variable", {"query": POST_QUERY}),
    ("NUL in a literal", {"query": '{ user(handle: "a\\u0000") { id } }'}),
    (
        "over the query cost",
        {
            "query": "{ viewer { posts(first: 100) { edges { node { author "
            "{ posts(first: 100) { edges { node { id } } } } } } } } }"
        },
    ),
]


def _errors(errors: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["message"], e["extensions"]["code"]) for e in errors]


@pytest.mark.parametrize(("case", "payload"), BAD_DOCUMENTS, ids=[c for c, _ in BAD_DOCUMENTS])
async def test_a_bad_document_is_an_error_message_as_over_http(
    server: ApiServer, user, case: str, payload: dict[str, Any]
) -> None:
    """graphql-transport-ws wants an `error` message for errors before execution; its errors
    are HTTP's (message and code), and the socket stays open. A syntax error used to end
    with a bare `complete` (and a traceback in the log)."""
    async with server.http() as http:
        answer = (await http.post("/graphql", json=payload)).json()
    assert "data" not in answer or answer["data"] is None, answer
    ws = await authed(server, user)
    await send(ws, {"id": "bad", "type": "subscribe", "payload": payload})
    message = await receive(ws)
    assert message["type"] == "error" and message["id"] == "bad", message
    assert _errors(message["payload"]) == _errors(answer["errors"]), (case, message, answer)
    payload = await run_query(ws, "after", "{ viewer { handle } }", {})
    assert payload == {"data": {"viewer": {"handle": "sock"}}}
    assert "Traceback" not in server.logs()
    await ws.close()


async def test_the_operation_past_the_concurrent_limit_is_a_typed_error(
    server: ApiServer, user
) -> None:
    """At most 10 operations at once per socket: the 11th gets an `error` saying the limit
    and what to do; once one completes another may start (the limit is on concurrency)."""
    ws = await authed(server, user)
    for n in range(10):
        await send(ws, {"id": f"{n}", "type": "subscribe", "payload": {"query": FEED_UPDATES}})
        assert (await receive(ws))["type"] == "next"
    await send(ws, {"id": "10", "type": "subscribe", "payload": {"query": FEED_UPDATES}})
    message = await receive(ws)
    assert message["type"] == "error" and message["id"] == "10", message
    [error] = message["payload"]
    assert error["extensions"] == {"code": "RATE_LIMITED", "limit": 10}, error
    assert "at most 10 running at once" in error["message"] and "complete" in error["message"]
    await send(ws, {"id": "0", "type": "complete"})
    await send(ws, {"id": "10", "type": "subscribe", "payload": {"query": FEED_UPDATES}})
    assert (await receive(ws))["type"] == "next"
    await ws.close()


@pytest.mark.parametrize("offered", [["graphql-ws"], []], ids=["legacy graphql-ws", "none"])
async def test_a_handshake_without_graphql_transport_ws_is_refused(
    server: ApiServer, offered: list[str]
) -> None:
    """Refused at the upgrade with a 400 that says what to send (it used to be accepted,
    then closed with 4406, a code the documentation did not list)."""
    with pytest.raises(InvalidStatus) as refused:
        await connect(server.ws_url, subprotocols=offered or None)  # type: ignore[arg-type]
    response = refused.value.response
    assert response.status_code == 400
    [error] = json.loads(response.body or b"{}")["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "graphql-transport-ws" in error["message"]
    # An intended refusal: uvicorn logs no ERROR for it (issue 39; its sansio protocol did,
    # `ASGI callable returned without completing handshake.`, when the app returned).
    await asyncio.sleep(0.5)
    assert "without completing handshake" not in server.logs(), server.logs()
