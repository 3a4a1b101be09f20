"""The ASGI application: GraphQL (HTTP + websocket), health, metrics and the demo page."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL

from app.api.context import Context
from app.api.schema import build_schema
from app.auth.tokens import user_id_from_header
from app.config import PROJECT_ROOT, get_settings
from app.errors import AppError
from app.observability.metrics import GRAPHQL_LATENCY
from app.state import AppState, create_state

DEMO_DIR = PROJECT_ROOT / "frontend-demo"


class FeedGraphQL(GraphQL):
    """Strawberry's ASGI view with our context, auth and a faster JSON encoder."""

    def __init__(self, state_getter: Any, **kwargs: Any) -> None:
        super().__init__(build_schema(), **kwargs)
        self._state = state_getter

    async def get_context(self, request: Request | WebSocket, response: Any) -> Context:  # type: ignore[override]
        state: AppState = self._state()
        viewer_id: int | None = None
        auth_error: AppError | None = None
        try:
            viewer_id = user_id_from_header(state.settings, request.headers.get("authorization"))
        except AppError as exc:
            auth_error = exc
        return Context(state=state, request=request, viewer_id=viewer_id, auth_error=auth_error)

    def encode_json(self, data: object) -> bytes:  # type: ignore[override]
        return orjson.dumps(data)


class BodyLimit:
    """Refuse request bodies over the limit before reading them into memory."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            response = JSONResponse(
                {
                    "errors": [
                        {
                            "message": f"Request body over {self.max_bytes} bytes.",
                            "extensions": {"code": "BAD_USER_INPUT"},
                        }
                    ]
                },
                status_code=413,
            )
            await response(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Any:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise ValueError("request body too large")
            return message

        await self.app(scope, limited_receive, send)


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


def create_app(state: AppState | None = None) -> Starlette:
    holder: dict[str, AppState] = {} if state is None else {"state": state}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        holder.setdefault("state", state or create_state())
        try:
            yield
        finally:
            if state is None:
                await holder["state"].close()

    def current_state() -> AppState:
        return holder["state"]

    settings = get_settings()
    graphql_app = BodyLimit(Timed(FeedGraphQL(current_state)), settings.max_request_bytes)

    async def healthz(request: Request) -> Response:
        st = current_state()
        try:
            async with st.engine.connect() as conn:
                await conn.execute(text("select 1"))
            await st.redis.ping()
        except Exception as exc:  # any failure means unhealthy, whatever its kind
            return JSONResponse({"status": "unavailable", "error": type(exc).__name__}, 503)
        return JSONResponse({"status": "ok"})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    async def index(request: Request) -> Response:
        page = DEMO_DIR / "index.html"
        if page.exists():
            return FileResponse(page)
        return PlainTextResponse("The demo page is not built; GraphiQL is at /graphql.")

    routes = [
        Route("/graphql", graphql_app, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql_app),
        Route("/healthz", healthz),
        Route("/metrics", metrics),
        Route("/", index),
    ]
    if DEMO_DIR.exists():
        routes.append(Mount("/static", StaticFiles(directory=Path(DEMO_DIR)), name="static"))
    return Starlette(routes=routes, lifespan=lifespan)


app = create_app()
