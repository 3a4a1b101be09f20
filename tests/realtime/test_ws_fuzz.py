"""A websocket fuzzer: random and adversarial graphql-transport-ws message sequences against
a real uvicorn (issue 19). Whatever a client sends, every answer is a protocol-valid message
or a close with a documented code, no traceback reaches the server log, and the server stays
responsive (a fresh socket still subscribes, /healthz answers).

`FUZZ_WS_SEQUENCES` (default 60) sequences of 1-14 messages each (two in five of them
keep to the protocol's message shapes, so their operations are answered, not cut short);
`FUZZ_WS_SEED` replays a run (the seed is printed on failure).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from app.operation_documents import operations
from tests.helpers import make_user
from tests.realtime.live import PROTOCOL, LiveClient
from tests.servers import ApiServer

SEQUENCES = int(os.environ.get("FUZZ_WS_SEQUENCES", "60"))
SEED = int(os.environ.get("FUZZ_WS_SEED", str(random.randrange(1 << 30))))
QUIET_SECONDS = 1.0  # no frame for this long after the last message: the sequence is done

# docs/API.md, "Live updates": every code the server may close a socket with.
DOCUMENTED_CLOSE_CODES = {1000, 1001, 1009, 1012, 1013, 4400, 4401, 4403, 4408, 4409, 4429}
SERVER_TYPES = {"connection_ack", "ping", "pong", "next", "error", "complete"}

FEED_UPDATES = operations()["FeedUpdates"]
QUERIES = [
    FEED_UPDATES,
    "{ viewer { handle } }",
    "query Q($h: String!) { user(handle: $h) { handle } }",
    "subscription { feedUpdates { newPostCount } } query Other { viewer { id } }",
    "mutation { logOut }",
    "{ viewer {",
    "{ nope }",
    "subscription A { feedUpdates { newPostCount } } "
    "subscription B { feedUpdates { latestPostAt } }",
    "fragment F on Query { viewer { id } } { ...F ...F }",
    "{ __typename }",
    "",
    "query { feed(first: 1000) { edges { cursor } } }",
    '{ user(handle: "\\u0000") { id } }',
    "{ " + "viewer { id } " * 30 + "}",
]
JUNK: list[Any] = [None, 0, -1, 2**70, 1.5, True, "", "x" * 300, [], [1, "a"], {}, {"a": {"b": []}}]


class Sequence:
    """One socket's messages, built from a seeded Random. A `polite` sequence keeps to the
    protocol's message shapes (any document, any order), so its operations get answers
    instead of the socket closing at the first junk message."""

    def __init__(self, rng: random.Random, token: str, polite: bool) -> None:
        self.rng = rng
        self.token = token
        self.polite = polite
        self.ids: list[Any] = []
        self.fresh = iter(range(1_000_000))

    def _id(self, *, reuse: bool = True) -> Any:
        rng = self.rng
        if self.ids and reuse and rng.random() < 0.4:
            return rng.choice(self.ids)  # reuse: duplicates, completes of live operations
        if self.polite:
            op_id: Any = f"p{next(self.fresh)}"
        else:
            op_id = rng.choice([str(rng.randrange(20)), "", "ü" * 3, "i" * 200])
            if rng.random() < 0.08:
                op_id = rng.choice(JUNK)  # not a string: an invalid message (4400)
        self.ids.append(op_id)
        return op_id

    def init(self) -> Any:
        rng = self.rng
        good = [
            {"Authorization": f"Bearer {self.token}"},
            {"authorization": f"Bearer {self.token}"},
            {"headers": {"Authorization": f"Bearer {self.token}"}},
        ]
        bad = [{"authorization": "Bearer not-a-token"}, {}, None, rng.choice(JUNK)]
        payload = rng.choice(good if self.polite or rng.random() < 0.75 else bad)
        message: dict[str, Any] = {"type": "connection_init"}
        if payload is not None or rng.random() < 0.5:
            message["payload"] = payload
        return message

    def subscribe(self) -> Any:
        if self.polite:
            return self.polite_subscribe()
        rng = self.rng
        payload: dict[str, Any] = {"query": rng.choice(QUERIES)}
        if rng.random() < 0.3:
            payload["variables"] = rng.choice([{"h": "nobody"}, {"h": 5}, *JUNK])
        if rng.random() < 0.2:
            payload["operationName"] = rng.choice(["A", "B", "Other", "Nope", *JUNK])
        if rng.random() < 0.1:
            payload["extensions"] = rng.choice(
                [{"persistedQuery": {"version": 1, "sha256Hash": "0" * 64}}, *JUNK]
            )
        if rng.random() < 0.05:
            payload = {"documentId": rng.choice(["sha256:" + "f" * 64, *JUNK])}
        if rng.random() < 0.05:
            payload["query"] = "{ viewer { id } }\n#" + "x" * (70 * 1024)  # over the limit
        message: dict[str, Any] = {"type": "subscribe", "id": self._id(), "payload": payload}
        if rng.random() < 0.05:
            message["payload"] = rng.choice(JUNK)
        if rng.random() < 0.03:
            del message["id"]
        return message

    def polite_subscribe(self) -> Any:
        rng = self.rng
        payload: dict[str, Any] = {"query": rng.choice(QUERIES)}
        if rng.random() < 0.3:
            payload["variables"] = rng.choice([{"h": "nobody"}, {"h": 5}, {}, {"h": "x" * 300}])
        if rng.random() < 0.2:
            payload["operationName"] = rng.choice(["A", "B", "Other", "Nope", "FeedUpdates"])
        return {"type": "subscribe", "id": self._id(reuse=False), "payload": payload}

    def other(self) -> Any:
        rng = self.rng
        if self.polite or rng.random() < 0.7:
            return rng.choice(
                [
                    {"type": "complete", "id": self._id()},
                    {"type": "ping"},
                    {"type": "ping", "payload": rng.choice(JUNK)},
                    {"type": "pong", "payload": {"at": 1}},
                ]
            )
        return rng.choice(
            [
                {"type": "complete"},
                {"type": rng.choice(["start", "stop", "connection_terminate", "data", "", 5])},
                {"id": "1"},
                rng.choice(JUNK),
                b"\x00\x01binary",
                "not json {",
            ]
        )

    def messages(self) -> list[Any]:
        rng = self.rng
        out: list[Any] = []
        if self.polite or rng.random() < 0.85:
            out.append(self.init())
        for _ in range(rng.randrange(0, 14)):
            pick = rng.random()
            if pick < 0.55:
                out.append(self.subscribe())
            elif pick < 0.6 and not self.polite:
                out.append(self.init())
            else:
                out.append(self.other())
        return out


def check_message(raw: str | bytes, sent_ids: list[Any]) -> str:
    """A frame from the server: JSON text, a known type, and the shape that type needs."""
    assert isinstance(raw, str), f"binary frame {raw!r}"
    message = json.loads(raw)
    assert isinstance(message, dict), message
    kind = message.get("type")
    assert kind in SERVER_TYPES, message
    if kind in ("next", "error", "complete"):
        assert isinstance(message.get("id"), str), message
        assert message["id"] in sent_ids, message
    if kind == "error":
        errors = message["payload"]
        assert isinstance(errors, list) and errors, message
        for error in errors:
            assert isinstance(error["message"], str) and error["extensions"]["code"], message
    if kind == "next":
        payload = message["payload"]
        assert "data" in payload, message
        for error in payload.get("errors", []):
            assert error["extensions"]["code"], message
            assert error["extensions"]["code"] != "INTERNAL", message
    return str(kind)


async def run_sequence(server: ApiServer, messages: list[Any]) -> tuple[list[str], int | None]:
    """Send the messages; read until the server closes or stays quiet. (types, close code)."""
    ws: ClientConnection = await connect(server.ws_url, subprotocols=[PROTOCOL])  # type: ignore[list-item]
    sent_ids = [m.get("id") for m in messages if isinstance(m, dict)]
    kinds: list[str] = []
    try:
        for message in messages:
            if isinstance(message, bytes | str):
                await ws.send(message)
            else:
                await ws.send(json.dumps(message))
    except ConnectionClosed:
        pass
    try:
        while True:
            raw = await asyncio.wait_for(ws.recv(), QUIET_SECONDS)
            kinds.append(check_message(raw, sent_ids))
    except TimeoutError:
        # Quiet and still open: it must still answer a ping.
        await ws.send(json.dumps({"type": "ping"}))
        while True:
            raw = await asyncio.wait_for(ws.recv(), 5)
            if check_message(raw, sent_ids) == "pong":
                break
        await ws.close()
        return kinds, None
    except ConnectionClosed:
        pass
    assert ws.close_code in DOCUMENTED_CLOSE_CODES, (ws.close_code, ws.close_reason, kinds)
    return kinds, ws.close_code


@pytest.fixture
async def fuzz_server(test_database: str) -> AsyncIterator[ApiServer]:
    async with ApiServer(env={"REALTIME_CONNECTION_INIT_TIMEOUT_SECONDS": "2"}) as api:
        yield api


async def test_random_message_sequences_get_valid_answers(fuzz_server: ApiServer) -> None:
    rng = random.Random(SEED)
    async with fuzz_server.http() as http:
        token, _ = await make_user(http, "fuzzer")
    closes: dict[int | None, int] = {}
    kinds: dict[str, int] = {}
    for n in range(SEQUENCES):
        messages = Sequence(rng, token, polite=rng.random() < 0.4).messages()
        try:
            got, code = await run_sequence(fuzz_server, messages)
        except Exception as exc:
            raise AssertionError(f"seed {SEED}, sequence {n}: {messages!r:.2000}") from exc
        closes[code] = closes.get(code, 0) + 1
        for kind in got:
            kinds[kind] = kinds.get(kind, 0) + 1
    print(f"seed {SEED}: {SEQUENCES} sequences; closes {closes}; messages {kinds}")
    # Still responsive: a clean socket subscribes and /healthz answers.
    live = await LiveClient.open(fuzz_server, token)
    assert (await live.next_update(5))["newPostCount"] == 0
    await live.close()
    async with fuzz_server.http() as http:
        assert (await http.get("/healthz")).status_code == 200
    assert "Traceback" not in fuzz_server.log.read_text(errors="replace"), fuzz_server.logs()
