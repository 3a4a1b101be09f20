"""Every assumption the fast engine makes about other libraries' internals, in one place.

The fast engine (this package) goes below the public API of Strawberry, graphql-core and
uvicorn: it recognises Strawberry's resolver wrappers by name, reads and builds Strawberry's
`Info` from its private fields, imports graphql-core modules that are not re-exported at
`graphql`, subclasses its executor, and writes websocket frames and whole HTTP responses to
uvicorn's transport. Each such use is a name below, and each has a test that fails when the
upstream library changes it (tests/api/test_fast_adapter.py, run against the newest releases
by `make canary`). When one fails, this module is where the upgrade is made; nothing else in
the package names an upstream private.

Public APIs (graphql-core's `graphql` package, `strawberry.types.Info`'s public properties,
`websockets.protocol.State`) are used directly elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from graphql import GraphQLEnumType, GraphQLField, GraphQLResolveInfo, GraphQLSchema

# -- graphql-core: modules not re-exported by the `graphql` package ------------------------
# The executor's own types and helpers (graphql-core 3.3's executor module layout).
from graphql.execution.collect_fields import FieldDetailsList, GroupedFieldSet
from graphql.execution.execute import execute_subscription_event
from graphql.execution.executor import to_nodes
from graphql.pyutils import Path, Undefined
from graphql.pyutils.gather_with_cancel import gather_with_cancel

# -- Strawberry ------------------------------------------------------------------------------
# The executor Strawberry runs (it builds Strawberry's GraphQLResolveInfo subclass); the fast
# executor subclasses it. Not exported at `strawberry.schema`.
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.schema.schema_converter import GraphQLCoreConverter

# The serializer of Strawberry's DateTime (and Date, Time) scalars: `methodcaller("isoformat")`,
# one object; the compiler renders a datetime of such a leaf with `datetime.isoformat`.
from strawberry.schema.types.base_scalars import isoformat as STRAWBERRY_ISOFORMAT
from strawberry.types.field import StrawberryField
from strawberry.types.nodes import get_variable_values

__all__ = [
    "BASIC_RESOLVER",
    "STRAWBERRY_ISOFORMAT",
    "SYNC_RESOLVER",
    "UVICORN_SANSIO_ATTRIBUTES",
    "UVICORN_SANSIO_PROTOCOL",
    "BaseExecutor",
    "FieldDetailsList",
    "GroupedFieldSet",
    "Path",
    "StrawberryField",
    "Undefined",
    "enum_class",
    "execute_subscription_event",
    "forget_subfield_memo",
    "gather_with_cancel",
    "graphql_schema",
    "make_info",
    "raw_info",
    "strawberry_field",
    "strawberry_schema",
    "to_nodes",
    "uvicorn_protocol",
    "uvicorn_transport",
    "variable_values",
]

BaseExecutor = StrawberryGraphQLCoreExecutionContext

# Names Strawberry gives a field's GraphQL resolver (schema_converter.from_resolver): a basic
# field's (no resolver: `field.get_result(source, None, [], {})`, i.e. the default resolver,
# getattr) and the sync wrapper of a resolver function.
BASIC_RESOLVER = "_get_basic_result"
SYNC_RESOLVER = "_resolver"


def strawberry_schema(schema: GraphQLSchema) -> Any | None:
    """The Strawberry schema that built this graphql-core schema (None for a plain one)."""
    return getattr(schema, "_strawberry_schema", None)


def graphql_schema(schema: Any) -> GraphQLSchema:
    """The graphql-core schema a Strawberry schema built."""
    built = schema._schema
    assert isinstance(built, GraphQLSchema)
    return built


def strawberry_field(field_def: GraphQLField) -> StrawberryField | None:
    """The Strawberry field a graphql-core field was converted from, if any."""
    definition = (field_def.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    return definition if isinstance(definition, StrawberryField) else None


def enum_class(named: Any) -> type | None:
    """A Strawberry enum's Python class, kept on its graphql-core type (else None)."""
    if not isinstance(named, GraphQLEnumType):
        return None
    wrapped = getattr(named, "wrapped_cls", None)
    return wrapped if isinstance(wrapped, type) else None


def make_info(info_class: type, raw: GraphQLResolveInfo[Any], field: StrawberryField) -> Any:
    """Strawberry's `Info` as its resolver wrapper builds it (schema_converter)."""
    return info_class(_raw_info=raw, _field=field)


def raw_info(info: Any) -> GraphQLResolveInfo[Any]:
    """graphql-core's resolve info behind a Strawberry `Info`."""
    return info._raw_info  # type: ignore[no-any-return]


def variable_values(info: Any) -> dict[str, Any]:
    """The operation's coerced variables, as Strawberry reads them for `Info`."""
    return dict(get_variable_values(raw_info(info)))


def forget_subfield_memo(executor: Any) -> None:
    """graphql-core 3.3 shares `_relevant_sub_fields` (its collect_subfields memo) between
    a subscription's executor and its per-event copies; a fresh one per copy."""
    executor._relevant_sub_fields = {}


# -- uvicorn ---------------------------------------------------------------------------------
# The websocket protocol class whose connection the raw frame writer drives (uvicorn's
# websockets-sansio implementation) and the attributes it reads on it.
UVICORN_SANSIO_PROTOCOL = "WebSocketsSansIOProtocol"
UVICORN_SANSIO_ATTRIBUTES = ("conn", "close_sent", "handshake_complete", "writable", "transport")


def uvicorn_protocol(send: Any) -> Any | None:
    """uvicorn passes the app its protocol's bound `send`: the protocol object, if that one."""
    protocol = getattr(send, "__self__", None)
    if protocol is None or type(protocol).__name__ != UVICORN_SANSIO_PROTOCOL:
        return None
    if not all(hasattr(protocol, name) for name in UVICORN_SANSIO_ATTRIBUTES):
        return None
    return protocol


def uvicorn_transport(send: Any) -> Any | None:
    """The asyncio transport behind a uvicorn `send` (any of its protocols), else None."""
    return getattr(getattr(send, "__self__", None), "transport", None)


# uvicorn's httptools HTTP/1.1 cycle (one per request; `send` is its bound method) and the
# attributes `write_response` reads and sets on it, as its own `send` does for a response
# with a content-length (uvicorn.protocols.http.httptools_impl.RequestResponseCycle.send).
UVICORN_HTTP_CYCLE = "RequestResponseCycle"
UVICORN_HTTP_MODULE = "uvicorn.protocols.http.httptools_impl"
UVICORN_HTTP_ATTRIBUTES = (
    "transport",
    "flow",
    "disconnected",
    "keep_alive",
    "response_started",
    "response_complete",
    "chunked_encoding",
    "expected_content_length",
    "waiting_for_100_continue",
    "default_headers",
    "access_log",
    "access_logger",
    "message_event",
    "on_response",
)
# The cycle's type, once checked (a class, not an instance: one look-up per request).
_http_cycles: dict[type, bool] = {}


def uvicorn_http_cycle(send: Any) -> Any | None:
    """The httptools RequestResponseCycle behind uvicorn's HTTP `send`, else None (another
    server, uvicorn's h11 implementation, or a uvicorn whose cycle lacks an attribute)."""
    cycle = getattr(send, "__self__", None)
    if cycle is None:
        return None
    kind = type(cycle)
    known = _http_cycles.get(kind)
    if known is None:
        known = _http_cycles[kind] = (
            kind.__name__ == UVICORN_HTTP_CYCLE
            and kind.__module__ == UVICORN_HTTP_MODULE
            and all(hasattr(cycle, name) for name in UVICORN_HTTP_ATTRIBUTES)
        )
    return cycle if known else None


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


_STATUS_LINES = {status: _status_line(status) for status in range(100, 600)}


def write_response(
    cycle: Any, status: int, headers: Sequence[tuple[bytes, bytes]], body: bytes
) -> bool:
    """A whole response (status, `headers` with its content-length, body) in ONE transport
    write, where uvicorn's `send` makes two (head, then body: each a send(2) on loopback
    that wakes the peer). The bytes are the ones its two sends write: the status line, its
    default headers (server, date), `headers`, `connection: close` when the connection is
    not kept alive, then the body; and the cycle ends as its send leaves it. `headers` are
    the caller's constants (lower-case names, values without CR/LF): not re-checked.

    False, with nothing written, where its `send` must do the work: writes paused (it
    waits for the drain), client gone, a response already begun, an access log that writes
    (it logs each response; under `--log-level warning` the access logger drops them)."""
    if (
        cycle.response_started
        or cycle.disconnected
        or cycle.flow.write_paused
        or (cycle.access_log and cycle.access_logger.isEnabledFor(logging.INFO))
    ):
        return False
    cycle.response_started = True
    cycle.waiting_for_100_continue = False
    cycle.chunked_encoding = False  # a content-length response, as its send would note
    content = [_STATUS_LINES[status]]
    for name, value in cycle.default_headers:
        content += (name, b": ", value, b"\r\n")
    for name, value in headers:
        content += (name, b": ", value, b"\r\n")
    if not cycle.keep_alive:
        content.append(b"connection: close\r\n")
    content += (b"\r\n", body)
    cycle.transport.write(b"".join(content))
    cycle.expected_content_length = 0
    cycle.response_complete = True
    cycle.message_event.set()
    if not cycle.keep_alive:
        cycle.transport.close()
    cycle.on_response()
    return True
