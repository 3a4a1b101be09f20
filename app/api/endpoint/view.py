"""/graphql's view: Strawberry's ASGI view with our context, auth, media types, trusted
documents and a faster JSON encoder, and the latency timer around it.

It overrides Strawberry view methods that are not documented hooks (`execute_single`,
`run`, `parse_http_body`, ...): a listed exception to the fence (app.api.upstream.strawberry
VIEW_OVERRIDES, checked by tests/api/upstream/test_upstream_fence.py)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any, cast

import orjson
from cross_web import AsyncHTTPRequestAdapter, HTTPException
from graphql import GraphQLError
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError, MissingQueryError
from strawberry.http import GraphQLRequestData
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types import ExecutionResult

from app.api.endpoint.schema import build_schema
from app.api.endpoint.subscriptions import SocketContext
from app.api.endpoint.websocket import FeedTransportWSHandler, TextFrameAdapter, refuse_subprotocol
from app.api.schema.context import Context, http_context, request_region
from app.api.schema.cost import SURROGATE_MESSAGE, lone_surrogate_in
from app.api.transports import http_media
from app.api.transports.document_http import names_a_document, with_document_id
from app.api.transports.graphiql import graphiql_html
from app.api.transports.trusted import DocumentRefused
from app.api.upstream.starlette import server_send
from app.api.upstream.strawberry import (
    UNSET,
    CannotGetOperationTypeError,
    InvalidOperationTypeError,
    OperationType,
    UnsetType,
)
from app.api.upstream.uvicorn import forget_handshake
from app.auth import revocation
from app.auth.tokens import user_id_from_header
from app.config import Settings
from app.errors import AppError
from app.observability.metrics import GRAPHQL_LATENCY
from app.state import AppState


class FeedGraphQL(GraphQL):
    """Strawberry's ASGI view with our context, auth and a faster JSON encoder.

    Websockets speak graphql-transport-ws only (API.md); the legacy graphql-ws protocol has
    no place for the connection_init auth the API promises. Keep-alive is the websocket
    protocol's own ping/pong, sent by uvicorn (--ws-ping-interval/--ws-ping-timeout).
    """

    websocket_adapter_class = TextFrameAdapter
    graphql_transport_ws_handler_class = FeedTransportWSHandler  # type: ignore[assignment]

    def __init__(
        self,
        settings: Settings,
        state_getter: Any,
        hub_getter: Any = lambda: None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("subscription_protocols", (GRAPHQL_TRANSPORT_WS_PROTOCOL,))
        # A socket that never authenticates is closed (4408) instead of holding memory.
        init_timeout = settings.realtime_connection_init_timeout_seconds
        kwargs.setdefault("connection_init_wait_timeout", timedelta(seconds=init_timeout))
        schema = build_schema(settings)
        super().__init__(schema, **kwargs)
        self.documents = schema.documents  # trusted documents (app.api.transports.trusted)
        self._state = state_getter
        self._hub = hub_getter
        self.max_message_bytes = settings.max_request_bytes

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:  # type: ignore[override]
        state: AppState = self._state()
        if isinstance(request, Request):
            return await http_context(state, request)
        # Sockets authenticate at connection_init (SocketContext.authenticate); a trusted
        # edge's region header is read at the upgrade (a bad one: the serving region's
        # policy would be a guess, so the socket's operations fail as with a bad token).
        viewer_id: int | None = None
        auth_error: AppError | None = None
        region = state.settings.region
        header = request.headers.get("authorization")
        try:
            region = request_region(state.settings, request)
            viewer_id = user_id_from_header(state.settings, header) if header else None
        except AppError as exc:
            auth_error = exc
        return SocketContext(
            state=state,
            request=request,
            viewer_id=viewer_id,
            auth_error=auth_error,
            hub=self._hub(),
            region=region,
        )

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:  # type: ignore[override]
        """connection_init: authenticate the socket; a rejection closes it with 4403."""
        assert isinstance(context, SocketContext)
        context.authenticate()
        if context.token is not None:  # a logged-out or outdated token opens no socket
            try:
                # Batched with the sockets opening at the same time (one pipeline, one query).
                await revocation.check_together(
                    context.state.roles.limits, context.state.sessions, context.token
                )
            except AppError as exc:
                raise ConnectionRejectionError({"code": exc.code, "message": exc.message}) from exc
        return cast(UnsetType, UNSET)

    async def execute_single(  # type: ignore[override]
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: Any,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        """Strawberry's, but a subscription over HTTP is a typed error, not a null result,
        and a document may be named by its hash (app.api.transports.trusted)."""
        allowed = OperationType.from_http(request_adapter.method) - {OperationType.SUBSCRIPTION}
        if request_adapter.method == "GET" and not self.allow_queries_via_get:
            allowed -= {OperationType.QUERY}
        state: AppState = self._state()
        try:
            query = await self.documents.resolve_async(
                request_data.query,
                getattr(request_data, "document_id", None),
                request_data.extensions,
                state.engine,
                state.roles.sessions,
            )
        except DocumentRefused as refused:
            return ExecutionResult(data=None, errors=[refused])
        try:
            result = await self.schema.execute(
                query,
                root_value=root_value,
                variable_values=request_data.variables,
                context_value=context,
                operation_name=request_data.operation_name,
                allowed_operation_types=allowed,
                operation_extensions=request_data.extensions,
            )
        except InvalidOperationTypeError as exc:
            if exc.operation_type is not OperationType.SUBSCRIPTION:
                raise HTTPException(400, exc.as_http_error_reason(request_adapter.method)) from exc
            message = "Subscriptions run over the websocket at /graphql (graphql-transport-ws)."
            error = GraphQLError(message, extensions={"code": "BAD_USER_INPUT"})
            return ExecutionResult(data=None, errors=[error])
        except CannotGetOperationTypeError as exc:
            raise HTTPException(400, exc.as_http_error_reason()) from exc
        except MissingQueryError as exc:
            raise HTTPException(400, "No GraphQL query found in the request") from exc
        if query and self.documents.learnable(query, request_data.extensions) is not None:
            # Apollo's automatic persisted queries: a text that ran is kept by its hash.
            await self.documents.learn(
                query,
                request_data.extensions,
                result.data is not None,
                context.budget_key(),
                state.roles.sessions,
                state.roles.limits,
            )
        return result

    async def run(  # type: ignore[override]
        self, request: Request | WebSocket, context: Any = UNSET, root_value: Any = UNSET
    ) -> Response | WebSocket:
        """Strawberry's, answering in the media type negotiated from `Accept`
        (app.api.transports.http_media); websockets pass straight through."""
        if isinstance(request, WebSocket):
            if await self.pick_websocket_subprotocol(request) is None:
                await refuse_subprotocol(request)  # never accepted, then closed 4406
                return request
            return await super().run(request, context, root_value)
        scope = request.scope
        chosen = http_media.negotiate_request(scope, request.headers.get("accept"))
        wants_ide = self.should_render_graphql_ide(self.request_adapter_class(request))
        if wants_ide and not self.graphql_ide:
            return http_media.no_graphiql()
        if chosen is None and not wants_ide:
            return http_media.not_acceptable()
        try:
            response = await super().run(request, context, root_value)
        except HTTPException as exc:
            return http_media.request_error(scope, exc)
        return http_media.finish(scope, response)

    async def create_websocket_response(
        self, request: WebSocket, subprotocol: str | None
    ) -> WebSocket:
        await request.accept(subprotocol=subprotocol)
        forget_handshake(server_send(request))  # uvicorn's copy of the upgrade's headers
        return request

    async def process_result(self, request: Request, result: ExecutionResult) -> Any:
        return http_media.shape_result(
            request.scope, result, await super().process_result(request, result)
        )

    async def parse_http_body(self, request: AsyncHTTPRequestAdapter) -> Any:
        """Strawberry's, keeping the `documentId` it drops (transports.trusted). A body that is
        JSON but not an object, or not UTF-8, is a request error (400), not a crash."""
        try:
            data = await super().parse_http_body(request)
        except (AttributeError, TypeError, UnicodeDecodeError) as exc:
            raise HTTPException(400, "The body must be a JSON object in UTF-8.") from exc
        if isinstance(data, GraphQLRequestData):
            data = await with_document_id(request, data)
        return data

    def should_render_graphql_ide(self, request: Any) -> bool:
        return super().should_render_graphql_ide(request) and not names_a_document(request)

    def encode_json(self, data: object) -> bytes:
        return orjson.dumps(data)

    def decode_json(self, data: str | bytes) -> object:
        """Python's json (bodies, GET `variables` and `extensions`), refusing a lone
        surrogate (a \\ud800-\\udfff escape not in a pair) in any field: no UTF-8 text holds
        one, so echoed in an error (an operationName) or passed on it fails later, a 500."""
        value = json.loads(data)
        escaped = b"\\u" in data if isinstance(data, bytes) else "\\u" in data
        if escaped and lone_surrogate_in(value):
            raise HTTPException(400, SURROGATE_MESSAGE)
        return value

    async def render_graphql_ide(self, request: Request) -> Response:
        """GraphiQL from vendored assets (app/api/transports/graphiql.py): it works offline."""
        return HTMLResponse(graphiql_html(request.url.path))


class Timed:
    """Request latency histogram for /graphql over HTTP."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            GRAPHQL_LATENCY.observe(time.perf_counter() - start)
