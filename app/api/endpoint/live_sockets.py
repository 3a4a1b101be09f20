"""/graphql's websockets served before Starlette's middleware and router (decision 0055),
with the guards the middleware gave them, and the Starlette app that routes them there."""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Match, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL

from app.api.endpoint.subscriptions import ABORT_KEY
from app.api.endpoint.view import FeedGraphQL
from app.api.endpoint.websocket import refuse_subprotocol
from app.api.fast.compiled_http import RAW_RESPONSE_KEY
from app.api.fast.raw_frames import SCOPE_KEY as RAW_FRAMES_KEY
from app.api.fast.raw_frames import RawFrames
from app.api.transports import lean_sockets
from app.api.transports.admission import SLOTS_SCOPE_KEY, Slots
from app.api.upstream.uvicorn import uvicorn_http_cycle, uvicorn_protocol, uvicorn_transport
from app.observability.quiet_logs import note_request


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
        note_request(scope)  # the probe's requests are routine in the logs (quiet_logs)
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
