"""`websockets` internals: the handshake `Request` its server parser keeps (decision 0055).

`websockets`' `ServerProtocol.parse` generator keeps the handshake's `Request` (its header
map and lines, ~2 KB) in a local variable for as long as the connection lives, because it
goes on to parse frames in the same generator. Once the socket is open and its parser waits
between frames, the parser is replaced by the frame loop alone (`Protocol.parse`), which is
what the old one runs from then on.

Internals used (each checked before use): `Protocol.parse` and `.parser`, `.reader`, and
the generator frames `Protocol.parse` -> `StreamReader.at_eof` that say the parser waits
between frames. tests/realtime/test_lean_sockets.py fails when one of these changes.
"""

from __future__ import annotations

from typing import Any

from websockets.protocol import Protocol, State
from websockets.streams import StreamReader

__all__ = ["drop_handshake_request"]

_FRAME_LOOP = Protocol.parse.__code__
_WAIT_BETWEEN_FRAMES = StreamReader.at_eof.__code__


def drop_handshake_request(conn: Any) -> bool:
    """Replace an open connection's parser with the frame loop it runs anyway, dropping the
    handshake Request its generator holds. Only while it waits between frames (nothing
    half-read in its locals). False: left alone (try again later)."""
    if not isinstance(conn, Protocol) or conn.state is not State.OPEN:
        return False
    parser = conn.parser
    loop = getattr(parser, "gi_yieldfrom", None)
    if getattr(loop, "gi_code", None) is _FRAME_LOOP:
        waiting = getattr(loop, "gi_yieldfrom", None)
        reader = conn.reader
        idle = not reader.buffer and not reader.eof
        if getattr(waiting, "gi_code", None) is _WAIT_BETWEEN_FRAMES and idle:
            fresh = Protocol.parse(conn)
            next(fresh)  # runs to the wait for the next frame's first byte
            conn.parser = fresh
            parser.close()
            return True
    return False
