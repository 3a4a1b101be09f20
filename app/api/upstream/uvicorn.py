"""uvicorn internals: its protocol objects behind the ASGI `send`, its httptools request
cycle (a whole response in one write), its websockets-sansio protocol's handshake, and the
proxy-header middleware's host matcher and httptools protocol class that
app.api.transports.connections extends.

uvicorn passes the app its protocol's (or request cycle's) bound `send`; each use below
checks the object's type and attributes first, and under another server or protocol finds
nothing and leaves the request alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from uvicorn.middleware.proxy_headers import _TrustedHosts as TrustedHosts
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.api.upstream.websockets import drop_handshake_request

__all__ = [
    "UVICORN_HTTP_ATTRIBUTES",
    "UVICORN_HTTP_CYCLE",
    "UVICORN_HTTP_MODULE",
    "UVICORN_SANSIO_ATTRIBUTES",
    "UVICORN_SANSIO_PROTOCOL",
    "HttpToolsProtocol",
    "TrustedHosts",
    "end_denied_handshake",
    "forget_handshake",
    "uvicorn_http_cycle",
    "uvicorn_protocol",
    "uvicorn_transport",
    "write_response",
]

# The websocket protocol class whose connection the raw frame writer drives (uvicorn's
# websockets-sansio implementation) and the attributes it reads on it.
UVICORN_SANSIO_PROTOCOL = "WebSocketsSansIOProtocol"
UVICORN_SANSIO_ATTRIBUTES = (
    "conn",
    "close_sent",
    "handshake_complete",
    "initial_response",
    "writable",
    "transport",
)


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


def forget_handshake(send: Any) -> None:
    """uvicorn's sansio websocket keeps the upgrade's request and response (two header
    maps, ~4 KB) for the socket's life, and the `websockets` parser the request once more
    (app.api.upstream.websockets); nothing reads them once the socket is accepted. `send`:
    the server's, as the WebSocket got it (app.api.upstream.starlette.server_send)."""
    protocol: Any = uvicorn_protocol(send)
    if protocol is not None and protocol.handshake_complete:
        protocol.request = protocol.response = None
        drop_handshake_request(protocol.conn)


def end_denied_handshake(send: Any) -> None:
    """After a denial response (ASGI's `websocket.http.response`: an HTTP answer to the
    upgrade, written whole and the connection closed), uvicorn's sansio websocket still
    counts its handshake as not completed and, when the app returns, logs
    `ASGI callable returned without completing handshake.` at ERROR for what was an intended
    refusal (uvicorn 0.54; its legacy `websockets` implementation does not). The handshake
    did end, in a refusal: mark it so. Elsewhere (another server or protocol, a denial not
    yet written) nothing is touched. `send`: the server's (starlette.server_send)."""
    protocol: Any = uvicorn_protocol(send)
    if (
        protocol is not None
        and protocol.initial_response is not None
        and protocol.close_sent
        and not protocol.handshake_complete
    ):
        protocol.handshake_complete = True
