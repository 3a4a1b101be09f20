"""Strawberry internals: every name below Strawberry's public API that the service uses.

The fast engine recognises Strawberry's resolver wrappers by name, reads and builds its
`Info` from private fields, subclasses its executor and reads the serializer of its DateTime
scalar; the view (app.api.endpoint.view) and the websocket handler
(app.api.endpoint.websocket) subclass Strawberry's ASGI view, websocket adapter and
graphql-transport-ws handler and override methods that are not documented hooks (listed in
VIEW_OVERRIDES, WEBSOCKET_ADAPTER_OVERRIDES and TRANSPORT_WS_HANDLER_OVERRIDES: a listed
exception, each name checked by tests/api/upstream/test_upstream_fence.py). Strawberry's public
modules (`strawberry`, `strawberry.asgi`, `strawberry.types`, `strawberry.http`,
`strawberry.extensions`, ...) are used directly elsewhere.
"""

from __future__ import annotations

from typing import Any

from graphql import GraphQLEnumType, GraphQLField, GraphQLResolveInfo, GraphQLSchema
from strawberry.http.exceptions import (
    NonJsonMessageReceived,
    NonTextMessageReceived,
    WebSocketDisconnected,
)
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError

# The executor Strawberry runs (it builds Strawberry's GraphQLResolveInfo subclass); the fast
# executor subclasses it. Not exported at `strawberry.schema`.
from strawberry.schema.schema import (
    StrawberryGraphQLCoreExecutionContext,
    StreamResult,
    validate_document,
)
from strawberry.schema.schema_converter import GraphQLCoreConverter

# Strawberry's DateTime scalar: the service's (app.api.schema.scalars) keeps its serializer
# and parser and adds a description and @specifiedBy. The serializer, shared by Date and Time
# too, is `methodcaller("isoformat")`, one object; the compiler renders a datetime of such a
# leaf with `datetime.isoformat`.
from strawberry.schema.types.base_scalars import DateTimeDefinition as STRAWBERRY_DATETIME
from strawberry.schema.types.base_scalars import isoformat as STRAWBERRY_ISOFORMAT
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    _OperationStreamClosed as OperationStreamClosed,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    CompleteMessage,
    ConnectionInitMessage,
    Message,
    SubscribeMessage,
)
from strawberry.types.execution import PreExecutionError
from strawberry.types.field import StrawberryField
from strawberry.types.graphql import OperationType
from strawberry.types.nodes import get_variable_values
from strawberry.types.unset import UNSET, UnsetType
from strawberry.utils.aio import aclosing

__all__ = [
    "BASIC_RESOLVER",
    "STRAWBERRY_DATETIME",
    "STRAWBERRY_ISOFORMAT",
    "SYNC_RESOLVER",
    "TRANSPORT_WS_HANDLER_OVERRIDES",
    "UNSET",
    "VIEW_CALLS",
    "VIEW_OVERRIDES",
    "WEBSOCKET_ADAPTER_OVERRIDES",
    "BaseExecutor",
    "BaseGraphQLTransportWSHandler",
    "CannotGetOperationTypeError",
    "CompleteMessage",
    "ConnectionInitMessage",
    "GraphQLCoreConverter",
    "InvalidOperationTypeError",
    "Message",
    "NonJsonMessageReceived",
    "NonTextMessageReceived",
    "Operation",
    "OperationStreamClosed",
    "OperationType",
    "PreExecutionError",
    "StrawberryField",
    "StreamResult",
    "SubscribeMessage",
    "UnsetType",
    "WebSocketDisconnected",
    "aclosing",
    "enum_class",
    "graphql_schema",
    "make_info",
    "raw_info",
    "strawberry_field",
    "strawberry_schema",
    "validate_document",
    "variable_values",
]

BaseExecutor = StrawberryGraphQLCoreExecutionContext

# Names Strawberry gives a field's GraphQL resolver (schema_converter.from_resolver): a basic
# field's (no resolver: `field.get_result(source, None, [], {})`, i.e. the default resolver,
# getattr) and the sync wrapper of a resolver function.
BASIC_RESOLVER = "_get_basic_result"
SYNC_RESOLVER = "_resolver"

# Methods of Strawberry's classes the service overrides that are not documented hooks
# (Strawberry's docs name get_context, get_root_value, process_result, encode_json,
# decode_json, on_ws_connect and render_graphql_ide for the view). A release that renames
# one would silently stop calling the override: tests/api/upstream/test_upstream_fence.py
# checks each is still defined by the base class, with the parameters the override takes.
# strawberry.asgi.GraphQL, by app.api.endpoint.view.FeedGraphQL:
VIEW_OVERRIDES = (
    "execute_single",
    "run",
    "create_websocket_response",
    "parse_http_body",
    "should_render_graphql_ide",
)
# ... and those it calls (app.api.endpoint.view, app.api.endpoint.live_sockets).
VIEW_CALLS = ("pick_websocket_subprotocol", "request_adapter_class", "allow_queries_via_get")
# strawberry.asgi.ASGIWebSocketAdapter, by app.api.endpoint.websocket.TextFrameAdapter:
WEBSOCKET_ADAPTER_OVERRIDES = ("iter_json", "send_json", "close")
# BaseGraphQLTransportWSHandler, by app.api.endpoint.websocket.FeedTransportWSHandler:
TRANSPORT_WS_HANDLER_OVERRIDES = (
    "handle",
    "handle_message",
    "handle_invalid_message",
    "shutdown",
    "handle_connection_init",
    "handle_subscribe",
    "run_operation",
    "_send_result_stream",
    "_handle_pre_execution_error",
    "cleanup_operation",
)


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
