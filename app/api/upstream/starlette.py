"""Starlette internals: the server's own `receive` and `send` behind a `WebSocket`.

Starlette's `WebSocket.receive`/`send` wrap the server's callables with state checks; the
websocket handler (app.api.endpoint.websocket) makes those checks itself around the server's
`receive` (one coroutine frame less per idle socket, decision 0055), and the socket-memory
code needs the server's bound `send` to find uvicorn's protocol (app.api.upstream.uvicorn)."""

from __future__ import annotations

from starlette.types import Receive, Send
from starlette.websockets import WebSocket

__all__ = ["server_receive", "server_send"]


def server_receive(websocket: WebSocket) -> Receive:
    """The ASGI server's `receive` the WebSocket was built with."""
    return websocket._receive


def server_send(websocket: WebSocket) -> Send:
    """The ASGI server's `send` the WebSocket was built with."""
    return websocket._send
