"""The ASGI application: GraphQL (HTTP + websocket), health, metrics and the demo page."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import orjson
from arq.constants import health_check_key_suffix
from cross_web import AsyncHTTPRequestAdapter, HTTPException
from graphql import GraphQLError
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
)
from starlette.routing import BaseRoute, Match, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError, MissingQueryError
from strawberry.http import GraphQLRequestData
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.types import ExecutionResult
from strawberry.types.graphql import OperationType
from strawberry.types.unset import UNSET, UnsetType

from app.api.endpoint.schema import FeedSchema, build_schema
from app.api.endpoint.subscriptions import ABORT_KEY, SocketContext
from app.api.endpoint.websocket import FeedTransportWSHandler, TextFrameAdapter, refuse_subprotocol
from app.api.fast.adapter import (
    graphql_schema,
    uvicorn_http_cycle,
    uvicorn_protocol,
    uvicorn_transport,
)
from app.api.fast.compiled_http import RAW_RESPONSE_KEY, CompiledHTTP
from app.api.fast.compiler import TextPlans, compile_documents
from app.api.fast.raw_frames import SCOPE_KEY as RAW_FRAMES_KEY
from app.api.fast.raw_frames import RawFrames
from app.api.schema.context import Context, http_context
from app.api.schema.cost import SURROGATE_MESSAGE, lone_surrogate_in
from app.api.transports import http_media, lean_sockets
from app.api.transports.admission import SLOTS_SCOPE_KEY, Admission, Slots, admission_slots
from app.api.transports.connections import SETTINGS_STATE_KEY
from app.api.transports.document_limits import MAX_TOKENS
from app.api.transports.graphiql import graphiql_assets_mount, graphiql_html
from app.api.transports.trusted import (
    DocumentRefused,
    manifest_route,
    names_a_document,
    with_document_id,
)
from app.auth import revocation
from app.auth.tokens import user_id_from_header
from app.config import REDIS_ROLES, Settings, get_settings
from app.errors import AppError
from app.exposure import bind_hosts, check_start, may_see_details
from app.fanout import lanes
from app.observability.exposition import render as render_metrics
from app.observability.metrics import GRAPHQL_LATENCY, READY
from app.operation_documents import shipped_dir
from app.realtime.hub import Hub
from app.state import AppState, create_state

DEMO_DIR = shipped_dir("frontend-demo")
# What the demo page loads from /static (development only): its build script and anything
# else in the folder are not served.
DEMO_SUFFIXES = (".js", ".css", ".html", ".svg", ".png", ".ico")


class DemoFiles(StaticFiles):
    """The demo page's assets: files with DEMO_SUFFIXES only."""

    def lookup_path(self, path: str) -> tuple[str, os.stat_result | None]:
        if not path.endswith(DEMO_SUFFIXES):
            return "", None
        return super().lookup_path(path)


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
        # Sockets authenticate at connection_init (SocketContext.authenticate).
        viewer_id: int | None = None
        auth_error: AppError | None = None
        header = request.headers.get("authorization")
        try:
            viewer_id = user_id_from_header(state.settings, header) if header else None
        except AppError as exc:
            auth_error = exc
        return SocketContext(
            state=state,
            request=request,
            viewer_id=viewer_id,
            auth_error=auth_error,
            hub=self._hub(),
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
        try:
            query = self.documents.resolve(
                request_data.query,
                getattr(request_data, "document_id", None),
                request_data.extensions,
            )
        except DocumentRefused as refused:
            return ExecutionResult(data=None, errors=[refused])
        try:
            return await self.schema.execute(
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
        forget_handshake(request)
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


class FeedApp(Starlette):
    """Starlette, with /graphql's websockets served before its middleware and router.

    A socket lives for hours, and whatever is on its task's stack lives as long: through
    Starlette's middleware stack, router and the Strawberry view's ASGI entry that was ~10
    coroutine frames (and the closures and objects they hold) per socket, ~10 KB at 5,000
    sockets. Here a /graphql websocket goes straight to the view (decision 0055), with what
    the middleware did for it done first (`LiveSockets.prepare`); HTTP, the lifespan and
    every other path take Starlette's way as before, an HTTP request with uvicorn's request
    cycle in its scope (RAW_RESPONSE_KEY: the compiled path writes its response in one go,
    decision 0063)."""

    def __init__(self, live: LiveSockets, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.live = live

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            live = self.live
            match, child_scope = live.route.matches(scope)
            if match is Match.FULL:
                scope["app"] = self
                scope.update(child_scope)
                live.prepare(scope, send)
                # FeedGraphQL.run's websocket branch, one coroutine frame less.
                websocket, view = WebSocket(scope, receive, send), live.view
                if await view.pick_websocket_subprotocol(websocket) is None:
                    await refuse_subprotocol(websocket)  # never accepted, then closed 4406
                    return
                await GraphQL.run(view, websocket)  # origin check, accept, protocol handler
                return
        elif scope["type"] == "http":
            # uvicorn's request cycle, for a response written whole (app.api.fast.compiled_http).
            cycle = uvicorn_http_cycle(send)
            if cycle is not None:
                scope[RAW_RESPONSE_KEY] = cycle
                try:
                    await super().__call__(scope, receive, send)
                finally:
                    # The cycle holds the scope: no reference cycle left for the collector.
                    scope.pop(RAW_RESPONSE_KEY, None)
                return
        await super().__call__(scope, receive, send)


class LiveSockets:
    """/graphql's websockets (FeedApp): the guards the middleware gave them, then the view.

    - admission: each operation sent over the socket takes one of the process's slots, the
      same `Slots` the Admission middleware gives HTTP requests (SLOTS_SCOPE_KEY);
    - send buffers bounded (kernel and transport), so a peer that stops reading blocks its
      own sends after ~100 KB instead of the kernel's autotuned ~4 MB, and the transport's
      `abort` in the scope so the realtime hub can cut such a peer off (a close frame cannot
      get through a full buffer); frames written straight to the transport (RawFrames);
    - uvicorn's sansio protocol forgets the upgrade's request and response once accepted.

    Under another server (no uvicorn transport) the socket gets no limits, as before."""

    def __init__(self, view: FeedGraphQL, slots: Slots | None, send_buffer: int) -> None:
        self.view = view
        self.slots = slots
        self.send_buffer = send_buffer
        self.route = WebSocketRoute("/graphql", view)

    def prepare(self, scope: Scope, send: Send) -> None:
        if self.slots is not None:
            scope[SLOTS_SCOPE_KEY] = self.slots
        protocol = uvicorn_protocol(send)
        if protocol is not None:  # before RawFrames reads its `writable`
            lean_sockets.lighten(protocol)
        # uvicorn passes its protocol's bound `send`; other servers simply get no limits.
        transport = uvicorn_transport(send)
        if transport is not None:
            self._limit(transport)
            scope[ABORT_KEY] = transport.abort
        # The protocol checked above, not looked up (and checked) once more.
        scope[RAW_FRAMES_KEY] = None if protocol is None else RawFrames(protocol)

    def _limit(self, transport: Any) -> None:
        if self.send_buffer <= 0:
            return
        with contextlib.suppress(Exception):
            sock = transport.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
        with contextlib.suppress(Exception):
            transport.set_write_buffer_limits(high=self.send_buffer)


def forget_handshake(websocket: WebSocket) -> None:
    """uvicorn's sansio websocket keeps the upgrade's request and response (two header
    maps, ~4 KB) for the socket's life, and the `websockets` parser the request once more
    (app.api.transports.lean_sockets); nothing reads them once the socket is accepted."""
    protocol: Any = uvicorn_protocol(websocket._send)
    if protocol is not None and protocol.handshake_complete:
        protocol.request = protocol.response = None
        lean_sockets.drop_handshake_request(protocol.conn)


def metrics_refusal(settings: Settings, authorization: str | None) -> Response | None:
    """Why /metrics is not served to this caller, or None. With METRICS_TOKEN set it wants
    `Authorization: Bearer <token>` (401 otherwise); without one it is open in development
    and off (404) in the production profile: each scrape runs SQL and Redis, and the figures
    tell an attacker how the service is doing."""
    token = settings.metrics_token
    if not token:
        if settings.profile == "production":
            return PlainTextResponse("Not Found", status_code=404)
        return None
    sent = (authorization or "").encode()
    if hmac.compare_digest(sent, f"Bearer {token}".encode()):
        return None
    return PlainTextResponse(
        "Send Authorization: Bearer <METRICS_TOKEN>.",
        status_code=401,
        headers={"www-authenticate": "Bearer"},
    )


PROBE_CACHE_SECONDS = 1.0  # /healthz and /readyz answers are this fresh at worst


T = TypeVar("T")


class Recent(Generic[T]):
    """An async check's last answer, kept `ttl` seconds; callers meanwhile share one run.

    /healthz and /readyz run SQL and Redis for anyone and outside admission: cached, a flood
    of probes costs the dependencies one check per `ttl` per process, and a hung dependency
    holds one check, not one per caller (each check is bounded by READY_TIMEOUT_SECONDS)."""

    def __init__(self, check: Callable[[], Awaitable[T]], ttl: float) -> None:
        self.check = check
        self.ttl = ttl
        self._answer: tuple[float, T] | None = None
        self._running: asyncio.Future[T] | None = None

    async def get(self) -> T:
        answer = self._answer
        if answer is not None and time.monotonic() - answer[0] < self.ttl:
            return answer[1]
        if self._running is None:
            self._running = asyncio.ensure_future(self._run())
        return await asyncio.shield(self._running)

    async def _run(self) -> T:
        try:
            value = await self.check()
            self._answer = (time.monotonic(), value)
            return value
        finally:
            self._running = None


WORKERS = "workers"  # readiness check names: workers:default, workers:big
REDIS = "redis"  # and redis, with redis:timelines, ... when the roles are on several servers
READY_TIMEOUT_SECONDS = 2.0  # per check: a hung dependency answers "timeout", not a hung probe


async def readiness(state: AppState) -> dict[str, str]:
    """Each dependency's state, "ok" or why not. A lane is up while one of its ARQ workers
    keeps the lane's health-check key alive (ARQ sets it every `health_check_interval`
    seconds, jobs.worker, and lets it lapse one second later)."""

    async def probe(check: Callable[[], Awaitable[object]]) -> str:
        try:
            return "ok" if await asyncio.wait_for(check(), READY_TIMEOUT_SECONDS) else "down"
        except TimeoutError:
            return "timeout"
        except Exception as exc:  # any failure means not ready, whatever its kind
            return type(exc).__name__

    async def postgres() -> bool:
        async with state.engine.connect() as conn:
            return bool((await conn.scalar(text("select 1"))) == 1)

    def lane_alive(queue: str) -> Callable[[], Awaitable[object]]:
        return lambda: state.roles.queue.exists(queue + health_check_key_suffix)

    checks = {"postgres": probe(postgres), REDIS: probe(lambda: _ping_all(state))}
    if len(state.roles.clients()) > 1:  # roles on several servers: which one is down
        for role in REDIS_ROLES:
            checks[f"{REDIS}:{role}"] = probe(state.roles.get(role).ping)
    checks.update({f"{WORKERS}:{lane}": probe(lane_alive(q)) for lane, q in lanes.LANES.items()})
    results = await asyncio.gather(*checks.values())
    return dict(zip(checks, results, strict=True))


async def _ping_all(state: AppState) -> bool:
    """Every Redis role's server answers (one PING per distinct client; a cluster client
    pings a node)."""
    answers = await asyncio.gather(*(client.ping() for client in state.roles.clients()))
    return all(answers)


def export_readiness(checks: dict[str, str]) -> None:
    """`feed_ready{part}`: 1 where /readyz finds the part ok, else 0 (alerts watch it; set by
    /readyz and, from its cached answer, before every /metrics scrape)."""
    for part, result in checks.items():
        READY.labels(part).set(1 if result == "ok" else 0)


def create_app(state: AppState | None = None) -> FeedApp:
    """The ASGI app over `state` (a root: without one, the settings come from
    `get_settings()` and the state is built at start-up)."""
    holder: dict[str, AppState] = {} if state is None else {"state": state}
    hubs: dict[str, Hub] = {}
    settings = state.settings if state is not None else get_settings()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Settings]]:
        if state is None:  # the served app (a root): where it listens, and in which profile
            check_start(settings, bind_hosts(sys.argv, os.environ))
        st = holder.setdefault("state", state or create_state(settings))
        # One pub/sub connection for every socket of this process (app.realtime.hub).
        hub = Hub(
            st.roles.pubsub, st.sessions, st.settings, st.timelines, leases_redis=st.roles.limits
        )
        await hub.start()
        hubs["hub"] = hub
        # Imported modules are never garbage: keep their objects out of every full
        # collection, whose pause grows with the heap (thousands of sockets make it long).
        gc.freeze()
        try:
            # Lifespan state: uvicorn hands it to each connection's protocol, which is how
            # app.api.transports.connections' guards get their settings.
            yield {SETTINGS_STATE_KEY: st.settings}
        finally:
            # Uvicorn has closed the sockets (1012) by now; anything left gets 1001.
            await hubs.pop("hub").stop()
            if state is None:
                await holder["state"].close()

    def current_state() -> AppState:
        return holder["state"]

    production = settings.profile == "production"
    graphql = FeedGraphQL(
        settings,
        current_state,
        lambda: hubs.get("hub"),
        graphql_ide=None if production else "graphiql",
    )
    # Registered documents (and texts) that can be planned skip the view, the router and
    # Starlette's exception middleware: answered by a middleware right inside admission
    # control (app.api.fast.compiled_http, decision 0052); the rest reaches the view below.
    compiled_front: list[Middleware] = []
    if settings.compiled_documents:
        schema = graphql.schema
        assert isinstance(schema, FeedSchema)  # built by FeedGraphQL (build_schema)
        plans = compile_documents(
            graphql_schema(schema), graphql.documents.by_text(), schema.process_errors
        )
        # Unregistered texts too, planned once each, bounded (decision 0045).
        texts = TextPlans(
            graphql_schema(schema),
            graphql.documents.rules,
            MAX_TOKENS,
            schema.process_errors,
            settings.compiled_text_plans,
            settings.compiled_text_max_chars,
        )
        compiled_front.append(
            Middleware(
                CompiledHTTP,
                state=current_state,
                documents=graphql.documents,
                compiled=plans,
                texts=texts,
                path="/graphql",
                latency=GRAPHQL_LATENCY,  # the requests it answers; Timed times the rest
            )
        )
    graphql_app = Timed(graphql)  # bodies arrive read and bounded (app.api.transports.admission)

    async def health() -> tuple[dict[str, str], int]:
        st = current_state()
        try:
            async with st.engine.connect() as conn:
                await conn.execute(text("select 1"))
            await _ping_all(st)
        except Exception as exc:  # any failure means unhealthy, whatever its kind
            return {"status": "unavailable", "error": type(exc).__name__}, 503
        return {"status": "ok"}, 200

    async def ready() -> tuple[dict[str, object], int]:
        checks = await readiness(current_state())
        export_readiness(checks)
        down = [name for name, state in checks.items() if state != "ok"]
        status = "unavailable" if down else "ready"
        body: dict[str, object] = {"status": status, "down": down, "checks": checks}
        return body, 503 if down else 200

    recent_health = Recent(health, PROBE_CACHE_SECONDS)
    recent_ready = Recent(ready, PROBE_CACHE_SECONDS)

    def probe_answer(request: Request, body: dict[str, Any], status: int) -> Response:
        """The whole answer in development or to the metrics token's bearer; in production
        anonymous callers get the status alone (app.exposure.may_see_details)."""
        if not may_see_details(settings, request.headers.get("authorization")):
            body = {"status": body["status"]}
        return JSONResponse(body, status)

    async def healthz(request: Request) -> Response:
        """Liveness: PostgreSQL and Redis answer (cached: see `Recent`)."""
        return probe_answer(request, *await recent_health.get())

    async def readyz(request: Request) -> Response:
        """Readiness: 503 naming what is down (PostgreSQL, Redis, a lane without a live worker)."""
        return probe_answer(request, *await recent_ready.get())

    async def metrics(request: Request) -> Response:
        refused = metrics_refusal(settings, request.headers.get("authorization"))
        if refused is not None:
            return refused
        answer, _ = await recent_ready.get()  # feed_ready as fresh as /readyz's answer
        export_readiness(cast(dict[str, str], answer["checks"]))
        body = await render_metrics(current_state())
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def index(request: Request) -> Response:
        page = DEMO_DIR / "index.html"
        if page.exists():
            return FileResponse(page)
        return PlainTextResponse("The demo page is not built; GraphiQL is at /graphql.")

    routes: list[BaseRoute] = [
        Route("/graphql", graphql_app, methods=["GET", "POST"]),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
    ]
    if not production:  # developer surfaces (decision 0065): 404 in production
        # The demo page, its assets and its list of document ids (the probe computes the
        # ids itself when the list is not served: app.probe.documents).
        routes += [manifest_route(graphql.documents), Route("/", index)]
        routes.append(graphiql_assets_mount())
        if DEMO_DIR.exists():
            routes.append(Mount("/static", DemoFiles(directory=Path(DEMO_DIR)), name="static"))
    # One set of admission slots: HTTP requests (Admission) and socket operations (LiveSockets).
    slots = admission_slots(settings.max_in_flight, settings.admission_wait_ms)
    live = LiveSockets(graphql, slots, settings.realtime_socket_send_buffer)
    return FeedApp(
        live,
        routes=routes,
        lifespan=lifespan,
        middleware=[
            # Outermost: a refused request costs no routing, body read or parse.
            Middleware(
                Admission,
                max_in_flight=settings.max_in_flight,
                wait_ms=settings.admission_wait_ms,
                max_bytes=settings.max_request_bytes,
                body_timeout_seconds=settings.request_body_timeout_seconds,
                slots=slots,
            ),
            *compiled_front,  # POST /graphql's compiled documents, past admission only
        ],
    )


app = create_app()
