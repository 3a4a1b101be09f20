"""Each assumption the adapters in app.api.upstream make about Strawberry, graphql-core and
uvicorn.

One test per assumption, against the installed libraries: an upgrade that renames a
resolver wrapper, moves a module, changes an executor method's parameters or uvicorn's
protocol class fails here, by name, before the differential tests notice lost speed (the fast
engine takes graphql-core's path when it does not recognise something, with the same bytes).
`make canary` runs these against the newest releases.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
from collections.abc import AsyncGenerator
from enum import Enum
from typing import Any

import orjson
import strawberry
from graphql import execute_sync, parse
from strawberry.types import Info

from app.api.fast.raw_frames import RawFrames
from app.api.schema.types import PAGE_EXTRAS
from app.api.upstream import graphql as graphql_internals
from app.api.upstream import strawberry as strawberry_internals
from app.api.upstream import uvicorn as uvicorn_internals


@strawberry.enum
class Shade(Enum):
    DARK = "dark"


def _read(parent: Any, extras: Any) -> None:
    return None


@strawberry.type
class Thing:
    name: str
    shade: Shade
    tagged: str = strawberry.field(default="t", metadata={PAGE_EXTRAS: _read})

    @strawberry.field
    def upper(self) -> str:
        return self.name.upper()

    @strawberry.field
    async def later(self) -> str:
        return self.name

    @strawberry.field
    def seen(self, info: Info) -> str:
        seen.append(info)
        return info.field_name


seen: list[Any] = []


@strawberry.type
class Query:
    @strawberry.field
    def thing(self, size: int = 1) -> Thing:
        return Thing(name="a", shade=Shade.DARK)


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def things(self) -> AsyncGenerator[Thing, None]:  # pragma: no cover - never run
        yield Thing(name="a", shade=Shade.DARK)


SCHEMA = strawberry.Schema(query=Query, subscription=Subscription)
GRAPHQL = strawberry_internals.graphql_schema(SCHEMA)


def _field(type_name: str, name: str) -> Any:
    return GRAPHQL.get_field(GRAPHQL.get_type(type_name), name)  # type: ignore[arg-type]


# -- Strawberry ------------------------------------------------------------------------------


def test_strawberry_names_a_basic_fields_resolver() -> None:
    assert _field("Thing", "name").resolve.__name__ == strawberry_internals.BASIC_RESOLVER


def test_strawberry_names_a_sync_resolvers_wrapper() -> None:
    assert _field("Thing", "upper").resolve.__name__ == strawberry_internals.SYNC_RESOLVER
    assert _field("Thing", "later").resolve.__name__ != strawberry_internals.SYNC_RESOLVER


def test_the_graphql_schema_points_back_to_strawberrys() -> None:
    assert strawberry_internals.strawberry_schema(GRAPHQL) is SCHEMA
    assert strawberry_internals.strawberry_schema(parse_schema()) is None


def parse_schema() -> Any:
    from graphql import build_schema

    return build_schema("type Query { a: Int }")


def test_a_graphql_field_keeps_its_strawberry_field_and_metadata() -> None:
    definition = strawberry_internals.strawberry_field(_field("Thing", "tagged"))
    assert isinstance(definition, strawberry_internals.StrawberryField)
    assert definition.python_name == "tagged"
    assert definition.metadata[PAGE_EXTRAS] is _read
    assert definition.base_resolver is None
    assert definition.default_resolver(Thing(name="a", shade=Shade.DARK), "name") == "a"
    resolver = strawberry_internals.strawberry_field(_field("Thing", "seen"))
    assert resolver is not None and resolver.base_resolver is not None
    arguments = strawberry_internals.strawberry_field(_field("Query", "thing"))
    assert arguments is not None and [a.python_name for a in arguments.arguments] == ["size"]


def test_a_strawberry_enum_keeps_its_python_class() -> None:
    assert strawberry_internals.enum_class(GRAPHQL.get_type("Shade")) is Shade
    assert strawberry_internals.enum_class(GRAPHQL.get_type("String")) is None


def test_strawberrys_datetime_serializes_with_the_one_isoformat_caller() -> None:
    from datetime import UTC, datetime

    from app.api.endpoint.schema import build_schema
    from app.config import Settings

    date_time = strawberry_internals.graphql_schema(build_schema(Settings())).get_type("DateTime")
    assert (
        date_time is not None and date_time.serialize is strawberry_internals.STRAWBERRY_ISOFORMAT
    )  # type: ignore[attr-defined]
    moment = datetime(2026, 12, 2, 1, 2, 3, 4, tzinfo=UTC)
    assert strawberry_internals.STRAWBERRY_ISOFORMAT(moment) == datetime.isoformat(moment)


def test_info_is_built_from_graphql_cores_resolve_info() -> None:
    seen.clear()
    result = SCHEMA.execute_sync("query Q($n: Int = 2) { thing(size: $n) { seen } }")
    assert result.errors is None and result.data == {"thing": {"seen": "seen"}}
    (info,) = seen
    raw = strawberry_internals.raw_info(info)
    assert raw.field_name == "seen" and raw.parent_type.name == "Thing"
    assert strawberry_internals.variable_values(info) == {"n": 2}
    field = strawberry_internals.strawberry_field(_field("Thing", "seen"))
    assert field is not None
    rebuilt = strawberry_internals.make_info(SCHEMA.config.info_class, raw, field)
    assert isinstance(rebuilt, Info)
    assert (rebuilt.field_name, rebuilt.python_name, rebuilt.path) == (
        info.field_name,
        info.python_name,
        info.path,
    )


# -- graphql-core ----------------------------------------------------------------------------

# graphql-core's two value completions (a value, an awaitable) take the same parameters.
COMPLETE_PARAMETERS = [
    "self",
    "return_type",
    "field_details_list",
    "info",
    "path",
    "result",
    "position_context",
]
# The executor methods the fast executor overrides or calls, with the parameters it passes.
EXECUTOR_METHODS = {
    "execute_fields": [
        "self",
        "parent_type",
        "source_value",
        "path",
        "grouped_field_set",
        "position_context",
    ],
    "execute_field": [
        "self",
        "parent_type",
        "source",
        "field_details_list",
        "path",
        "position_context",
    ],
    "handle_field_error": ["self", "raw_error", "return_type", "field_details_list", "path"],
    "complete_value": COMPLETE_PARAMETERS,
    "complete_awaitable_value": COMPLETE_PARAMETERS,
    "build_resolve_info": ["self", "field_def", "field_nodes", "parent_type", "path"],
    "collect_subfields": ["self", "return_type", "field_details_list"],
    "collect_and_execute_subfields": [
        "self",
        "return_type",
        "field_details_list",
        "path",
        "result",
        "position_context",
    ],
    "settle_in_background": ["self", "awaitables"],
    "build_per_event_executor": ["self", "payload"],
}


def test_the_executor_methods_keep_their_parameters() -> None:
    for name, parameters in EXECUTOR_METHODS.items():
        method = getattr(strawberry_internals.BaseExecutor, name)
        assert list(inspect.signature(method).parameters) == parameters, name


def _executor(document: str) -> Any:
    executor = strawberry_internals.BaseExecutor.build(GRAPHQL, parse(document))
    assert not isinstance(executor, list), executor
    return executor


def test_grouped_field_sets_map_response_names_to_field_details() -> None:
    """What the fast executor's plans are built from: execute_fields gets a dict of response
    name -> field details (each with its `node`), collect_subfields returns (grouped field
    set, new defer usages, ...), to_nodes gives the FieldNodes."""
    calls: list[tuple[str, Any]] = []

    class Recording(strawberry_internals.BaseExecutor):  # type: ignore[misc]
        def execute_fields(
            self, parent_type: Any, source: Any, path: Any, grouped: Any, position: Any
        ) -> Any:
            calls.append((parent_type.name, grouped))
            if parent_type.name == "Query":
                collected = self.collect_subfields(GRAPHQL.get_type("Thing"), grouped["t"])
                calls.append(("collected", collected))
            return super().execute_fields(parent_type, source, path, grouped, position)

    result = SCHEMA.execute_sync("{ t: thing { name n: name shade } }")
    assert result.errors is None
    executor = Recording.build(GRAPHQL, parse("{ t: thing { name n: name shade } }"))
    assert not isinstance(executor, list)

    got = execute_sync(
        GRAPHQL, parse("{ t: thing { name n: name shade } }"), executor_class=Recording
    )
    assert got.errors is None and got.data == {"t": {"name": "a", "n": "a", "shade": "DARK"}}
    (query, root), (_, collected), (thing, grouped) = calls
    assert (query, thing) == ("Query", "Thing")
    assert list(root) == ["t"] and list(grouped) == ["name", "n", "shade"]
    assert len(collected) >= 2 and collected[0] == grouped and not collected[1]
    nodes = graphql_internals.to_nodes(grouped["n"])
    assert [n.name.value for n in nodes] == ["name"] and grouped["n"][0].node is nodes[0]
    assert executor.middleware_manager is None or not executor.middleware_manager.middlewares


def test_per_event_executors_share_the_subfield_memo() -> None:
    """The leak EventScopedExecutor works around: graphql-core's per-event copies share
    `_relevant_sub_fields`. When this fails, upstream fixed it: forget_subfield_memo (and
    EventScopedExecutor) can go."""
    executor = _executor("subscription { things { name } }")
    memo = executor._relevant_sub_fields
    copy = executor.build_per_event_executor(Thing(name="a", shade=Shade.DARK))
    assert copy._relevant_sub_fields is memo
    graphql_internals.forget_subfield_memo(copy)
    assert copy._relevant_sub_fields is not memo and copy._relevant_sub_fields == {}


def test_a_per_event_executor_runs_one_event() -> None:
    executor = _executor("subscription { things { name } }")
    event = executor.build_per_event_executor(Thing(name="b", shade=Shade.DARK))
    result = graphql_internals.execute_subscription_event(event)
    assert not inspect.isawaitable(result)
    assert result.data == {"things": {"name": "b"}} and not result.errors  # type: ignore[union-attr]


async def test_gather_with_cancel_gathers_in_order() -> None:
    async def value(n: int) -> int:
        await asyncio.sleep(0)
        return n

    assert await graphql_internals.gather_with_cancel(value(1), value(2)) == [1, 2]


# -- uvicorn ---------------------------------------------------------------------------------


async def test_uvicorns_websocket_send_is_its_sansio_protocols() -> None:
    """A real uvicorn server (the websockets-sansio protocol, as the launcher runs it): the
    app's `send` leads to the protocol and its transport, and a raw frame reaches the client."""
    import uvicorn
    import websockets

    found: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        found["protocol"] = uvicorn_internals.uvicorn_protocol(send)
        found["transport"] = uvicorn_internals.uvicorn_transport(send)
        raw = RawFrames.for_send(send)
        found["raw"] = raw is not None and raw.write(orjson.dumps({"raw": True}))
        while (await receive())["type"] != "websocket.disconnect":
            pass

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        ws="websockets-sansio",
        ws_per_message_deflate=False,
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, no event
            await asyncio.sleep(0.01)
        async with websockets.connect(f"ws://127.0.0.1:{port}/") as ws:
            frame = await asyncio.wait_for(ws.recv(), 5)
    finally:
        server.should_exit = True
        await serving
    protocol = found["protocol"]
    assert type(protocol).__name__ == uvicorn_internals.UVICORN_SANSIO_PROTOCOL
    assert all(hasattr(protocol, name) for name in uvicorn_internals.UVICORN_SANSIO_ATTRIBUTES)
    assert found["transport"] is protocol.transport
    assert found["raw"] is True and orjson.loads(frame) == {"raw": True}


async def _exchange(port: int, request: bytes, answers: int) -> list[bytes]:
    """`request` (one or more pipelined requests) on a fresh connection; the raw answers
    (each head and body, split by their content-length), then whether the server closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    out = []
    try:
        writer.write(request)
        for _ in range(answers):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            out.append(head + await asyncio.wait_for(reader.readexactly(length), 5))
        out.append(b"closed" if await asyncio.wait_for(reader.read(), 0.5) == b"" else b"open")
    except TimeoutError:
        out.append(b"open")
    finally:
        writer.close()
    return out


async def test_uvicorns_http_cycle_takes_a_whole_response_in_one_write() -> None:
    """A real uvicorn server (httptools, as the launcher runs it): the app's `send` leads to
    its request cycle, and `write_response` answers with the bytes uvicorn's own two sends
    write for the same response (keep-alive, `Connection: close`, pipelined requests), in
    one transport write, leaving the connection as they leave it."""
    import uvicorn

    writes: list[bytes] = []
    body = orjson.dumps({"data": {"x": 1}})
    headers = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        if scope["path"] == "/raw":
            cycle = uvicorn_internals.uvicorn_http_cycle(send)
            assert cycle is not None
            assert cycle.scope is scope  # why app.web takes it out of the scope when done
            transport = cycle.transport
            write = transport.write
            transport.write = lambda data: (writes.append(data), write(data))
            try:
                assert uvicorn_internals.write_response(cycle, 200, headers, body)
            finally:
                del transport.write
            assert not uvicorn_internals.write_response(
                cycle, 200, headers, body
            )  # already answered
            return
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http="httptools", log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())

    def request(path: str, extra: bytes = b"") -> bytes:
        return b"POST %s HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n%s\r\n{}" % (
            path.encode(),
            extra,
        )

    def dateless(answers: list[bytes]) -> list[bytes]:
        return [
            b"\r\n".join(line for line in a.split(b"\r\n") if not line.startswith(b"date: "))
            for a in answers
        ]

    try:
        while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, no event
            await asyncio.sleep(0.01)
        cases = [
            ([request("{}")], 1),
            ([request("{}"), request("{}")], 2),  # pipelined, kept alive
            ([request("{}", b"connection: close\r\n")], 1),
        ]
        for paths, answers in cases:
            raw = await _exchange(
                port, b"".join(p.replace(b"{}", b"/raw", 1) for p in paths), answers
            )
            asgi = await _exchange(
                port, b"".join(p.replace(b"{}", b"/asgi", 1) for p in paths), answers
            )
            assert dateless(raw) == dateless(asgi)
            assert raw[0].startswith(b"HTTP/1.1 200 OK\r\n") and raw[0].endswith(body)
        assert dateless(raw)[-1] == b"closed" and b"connection: close" in raw[0]
        assert len(writes) == 4 and all(w.endswith(body) for w in writes)  # one write each
    finally:
        server.should_exit = True
        await serving
    assert uvicorn_internals.uvicorn_http_cycle(lambda message: None) is None  # not uvicorn's
