"""Text frames written straight to a websocket's transport, for the live broadcast only.

Why: a post that reaches 5,000 sockets sends 5,000 frames, and the ASGI path to the socket
(Starlette's WebSocket state checks and exception wrapper, uvicorn's send, the websockets
protocol object building the frame) costs more Python than everything else a frame needs.
Measured on this machine (docs/decisions/0007-live-clients.md): a bare transport.write of a
~100-byte frame on loopback is ~9-13 us of CPU (mostly the kernel); the ASGI send added
~15-20 us more.

When it is safe, and only then (else `write` returns False and the caller takes the ASGI
path): the server is uvicorn's websockets-sansio protocol (its default with `websockets`
installed), the connection is OPEN with no close sent, no extension was negotiated (with
permessage-deflate the protocol object owns compression state; the launcher turns it off),
and the transport is not paused for back-pressure. A server-to-client frame is unmasked:
FIN + text opcode, the length, the payload (RFC 6455, 5.2). Frames are written whole, in
one call, on the event loop thread, so they never interleave with the protocol's own.
"""

from __future__ import annotations

import struct
from typing import Any

from websockets.protocol import State

from app.api.upstream.uvicorn import uvicorn_protocol

_TEXT_FIN = 0x81
SCOPE_KEY = "feed.raw_frames"  # where app.web's LiveSockets puts a socket's RawFrames


def frame_header(length: int) -> bytes:
    if length < 126:
        return bytes((_TEXT_FIN, length))
    if length < 1 << 16:
        return struct.pack("!BBH", _TEXT_FIN, 126, length)
    return struct.pack("!BBQ", _TEXT_FIN, 127, length)


class RawFrames:
    """Direct frame writes for one websocket served by uvicorn's sansio protocol."""

    __slots__ = ("_conn", "_protocol", "_transport", "_writable")

    def __init__(self, protocol: Any) -> None:
        self._protocol = protocol
        self._conn = protocol.conn
        self._writable = protocol.writable
        self._transport: Any = None  # set by uvicorn at connection_made, read on first write

    @classmethod
    def for_send(cls, send: Any) -> RawFrames | None:
        """From the ASGI `send` uvicorn hands the app (a bound method of its protocol)."""
        protocol = uvicorn_protocol(send)
        return None if protocol is None else cls(protocol)

    def write(self, payload: bytes) -> bool:
        """Write one text frame now; False when the ASGI path must be used instead."""
        protocol = self._protocol
        transport = self._transport
        if transport is None:
            transport = self._transport = protocol.transport
        if (
            protocol.close_sent
            or not protocol.handshake_complete
            or self._conn.state is not State.OPEN
            or self._conn.extensions
            or not self._writable.is_set()
            or transport.is_closing()
        ):
            return False
        n = len(payload)
        transport.write((bytes((_TEXT_FIN, n)) if n < 126 else frame_header(n)) + payload)
        return True
