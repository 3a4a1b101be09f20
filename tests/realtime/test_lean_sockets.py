"""app.api.transports.lean_sockets: the lean queue and event behave as asyncio's for what
uvicorn asks of them, the `websockets` parser keeps parsing after the handshake request is
dropped, and the upstream internals the module relies on are still there (these fail when
an upgrade of uvicorn or websockets changes them). The served path is driven end to end by
the other tests of this folder (every socket of the test server goes through it)."""

from __future__ import annotations

import asyncio
import os
import struct
import time

from prometheus_client import CollectorRegistry, Histogram
from uvicorn.config import Config
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState
from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.protocol import State
from websockets.server import ServerProtocol

from app.api.endpoint.websocket import Deadlines
from app.api.transports.lean_sockets import (
    LeanEvent,
    LeanQueue,
    drop_handshake_request,
    lighten,
)
from app.realtime.metrics import observe_many

HANDSHAKE = (
    b"GET /graphql HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
)


def masked_text(payload: bytes) -> bytes:
    """A client's text frame (clients mask theirs)."""
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    assert len(payload) < 126
    return struct.pack("!BB", 0x81, 0x80 | len(payload)) + mask + body


def open_server_protocol() -> ServerProtocol:
    conn = ServerProtocol()
    conn.receive_data(HANDSHAKE)
    [request] = conn.events_received()
    assert isinstance(request, Request)
    conn.send_response(conn.accept(request))
    conn.data_to_send()
    assert conn.state is State.OPEN
    return conn


def requests_held_by(conn: ServerProtocol) -> int:
    """Handshake requests in the locals of the parser's generators."""
    held, gen = 0, conn.parser
    while gen is not None:
        frame = getattr(gen, "gi_frame", None)
        if frame is not None:
            held += sum(isinstance(v, Request) for v in frame.f_locals.values())
        gen = getattr(gen, "gi_yieldfrom", None)
    return held


async def test_lean_queue_is_fifo_and_wakes_getters_in_order() -> None:
    queue: LeanQueue[int] = LeanQueue()
    assert queue.empty() and queue.qsize() == 0
    queue.put_nowait(1)
    queue.put_nowait(2)
    assert await queue.get() == 1
    assert queue.get_nowait() == 2
    first = asyncio.ensure_future(queue.get())
    second = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait(3)
    queue.put_nowait(4)
    assert await first == 3
    assert await second == 4


async def test_a_cancelled_getter_hands_its_item_on() -> None:
    queue: LeanQueue[str] = LeanQueue()
    first = asyncio.ensure_future(queue.get())
    second = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait("x")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs: `second` gets the item
    assert await second == "x"
    assert first.cancelled()
    assert queue.empty()


async def test_lean_event_sets_clears_and_wakes_waiters() -> None:
    event = LeanEvent(True)
    assert event.is_set() and await event.wait()
    event.clear()
    waiters = [asyncio.ensure_future(event.wait()) for _ in range(2)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    event.set()
    assert await asyncio.gather(*waiters) == [True, True]
    event.clear()
    cancelled = asyncio.ensure_future(event.wait())
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    event.set()  # a cancelled waiter is skipped
    assert event.is_set()


async def test_lighten_swaps_uvicorns_queue_and_event_keeping_what_is_queued() -> None:
    config = Config(app=lambda *a: None, ws_per_message_deflate=False)
    config.load()
    protocol = WebSocketsSansIOProtocol(config, ServerState(), {})
    protocol.queue.put_nowait({"type": "websocket.connect"})
    assert lighten(protocol)
    assert isinstance(protocol.queue, LeanQueue) and isinstance(protocol.writable, LeanEvent)
    assert protocol.writable.is_set()
    assert await protocol.receive() == {"type": "websocket.connect"}
    assert not lighten(protocol)  # once


def test_the_parser_without_the_handshake_request_still_parses_frames() -> None:
    conn = open_server_protocol()
    assert requests_held_by(conn) == 1  # what this drop is for
    assert drop_handshake_request(conn)
    assert requests_held_by(conn) == 0
    conn.receive_data(masked_text(b'{"type":"ping"}'))
    [frame] = conn.events_received()
    assert isinstance(frame, Frame) and frame.opcode is Opcode.TEXT
    assert frame.data == b'{"type":"ping"}'
    assert not drop_handshake_request(conn)  # already the frame loop


def test_a_half_read_frame_keeps_its_parser() -> None:
    conn = open_server_protocol()
    frame = masked_text(b'{"type":"ping"}')
    conn.receive_data(
        frame[:2]
    )  # the header is consumed (the buffer is empty), the rest not here yet
    assert not drop_handshake_request(conn)
    conn.receive_data(frame[2:])
    [received] = conn.events_received()
    assert received.data == b'{"type":"ping"}'


def test_observe_many_counts_as_many_observations() -> None:
    """app.realtime.metrics counts a broadcast's frames in one go: the samples must be those
    of one `observe` per frame (prometheus_client's internals it uses are still there)."""
    buckets = (0.01, 0.1, 1.0)
    one_by_one = Histogram("h", "h", buckets=buckets, registry=CollectorRegistry())
    at_once = Histogram("h", "h", buckets=buckets, registry=CollectorRegistry())
    for amount, times in ((0.05, 3), (0.5, 2), (7.0, 4), (0.001, 1)):
        for _ in range(times):
            one_by_one.observe(amount)
        observe_many(at_once, amount, times)

    def samples(histogram: Histogram) -> list[tuple[str, dict[str, str], float]]:
        return [
            (s.name, s.labels, round(s.value, 9))
            for metric in histogram.collect()
            for s in metric.samples
            if not s.name.endswith("_created")
        ]

    assert samples(at_once) == samples(one_by_one)


async def test_deadlines_run_in_time_order_and_cancelled_ones_never() -> None:
    """The token expiries of a process's sockets share one timer (app.api.endpoint.websocket)."""
    deadlines = Deadlines()
    fired: list[str] = []
    done = asyncio.Event()
    now = time.time()
    deadlines.add(now + 0.05, lambda: (fired.append("last"), done.set()))
    deadlines.add(now + 0.02, lambda: fired.append("second"))
    gone = deadlines.add(now + 0.01, lambda: fired.append("cancelled"))
    deadlines.add(now - 5, lambda: fired.append("first"))  # past: at once
    deadlines.cancel(gone)
    await asyncio.wait_for(done.wait(), 10)
    assert fired == ["first", "second", "last"]
    assert len(deadlines) == 0


async def test_cancelled_deadlines_do_not_pile_up() -> None:
    deadlines = Deadlines()
    far = time.time() + 3600
    keys = [deadlines.add(far, lambda: None) for _ in range(1000)]
    for key in keys[:-1]:
        deadlines.cancel(key)
    assert len(deadlines) == 1
    assert len(deadlines._heap) < 100  # compacted, not 1,000 entries until the hour is up
    deadlines.cancel(keys[-1])
