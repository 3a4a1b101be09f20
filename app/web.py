"""The ASGI application uvicorn serves (`app.web:app`): GraphQL over HTTP and websockets,
health, metrics and the demo page, composed from their modules.

The parts: the view (app.api.endpoint.view), the websocket fast lane and the Starlette app
(app.api.endpoint.live_sockets), the compiled documents (app.api.fast), admission
(app.api.transports.admission), /healthz and /readyz (app.health), /metrics
(app.metrics_endpoint). Here: the settings (a root, tests/test_settings_roots.py), the
lifespan, the routes and the middleware, and where the demo page is found on disk."""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from app.api.endpoint.live_sockets import FeedApp, LiveSockets
from app.api.endpoint.schema import FeedSchema
from app.api.endpoint.view import FeedGraphQL, Timed
from app.api.fast.compiled_http import CompiledHTTP
from app.api.fast.compiler import compile_documents
from app.api.fast.text_plans import TextPlans
from app.api.transports.admission import Admission, admission_slots
from app.api.transports.connections import SETTINGS_STATE_KEY
from app.api.transports.document_http import client_manifest_route, manifest_route
from app.api.transports.document_limits import MAX_TOKENS
from app.api.transports.graphiql import graphiql_assets_mount
from app.api.transports.media_files import media_route
from app.api.transports.open_files import raise_open_files
from app.api.upstream.strawberry import graphql_schema
from app.config import Settings, get_settings
from app.exposure import bind_hosts, check_start
from app.health import Probes
from app.metrics_endpoint import MetricsEndpoint
from app.observability.metrics import GRAPHQL_LATENCY
from app.observability.quiet_logs import quiet_api
from app.operation_documents import shipped_dir
from app.realtime.hub import Hub
from app.state import AppState, create_state

# What the demo page loads from /static (development only): its build script and anything
# else in the folder are not served.
DEMO_SUFFIXES = (".js", ".css", ".html", ".svg", ".png", ".ico")

log = logging.getLogger("app.web")


def demo_dir() -> Path:
    """Where the demo page (frontend-demo/) is read from: the wheel's copy, else the tree's."""
    return shipped_dir("frontend-demo")


class DemoFiles(StaticFiles):
    """The demo page's assets: files with DEMO_SUFFIXES only."""

    def lookup_path(self, path: str) -> tuple[str, os.stat_result | None]:
        if not path.endswith(DEMO_SUFFIXES):
            return "", None
        return super().lookup_path(path)


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
            # LOG_LEVEL: the routine lines summed up, not printed (decision 0085).
            quiet_api(settings)
            # A socket is a descriptor: the open-file limit as high as the OS lets this
            # process have it, also when no launcher raised it (decision 0092).
            limit = raise_open_files()
            log.log(logging.WARNING if limit.why_not else logging.INFO, "%s", limit.describe())
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

    probes = Probes(settings, current_state)
    metrics = MetricsEndpoint(settings, probes)
    demo = demo_dir()

    async def index(request: Request) -> Response:
        page = demo / "index.html"
        if page.exists():
            return FileResponse(page)
        return PlainTextResponse("The demo page is not built; GraphiQL is at /graphql.")

    routes: list[BaseRoute] = [
        Route("/graphql", graphql_app, methods=["GET", "POST"]),
        Route("/healthz", probes.healthz),
        Route("/readyz", probes.readyz),
        Route("/metrics", metrics.serve),
        media_route(current_state),  # the local store's objects (app.media, decision 0080)
    ]
    if not production:  # developer surfaces (decision 0065): 404 in production
        # The demo page, its assets and its list of document ids (the probe computes the
        # ids itself when the list is not served: app.probe.documents).
        routes += [
            manifest_route(graphql.documents),
            # The clients' registered manifests (python -m app.documents), id -> name.
            client_manifest_route(graphql.documents, lambda: current_state().engine),
            Route("/", index),
        ]
        routes.append(graphiql_assets_mount())
        if demo.exists():
            routes.append(Mount("/static", DemoFiles(directory=Path(demo)), name="static"))
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
