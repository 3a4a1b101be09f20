"""A lean graphql-transport-ws client for the subscribers benchmark.

Why not the `websockets` package: its asyncio client costs ~60-80 us of Python per received
frame, so 5,000 sockets receiving a frame each kept the client busy for ~0.4 s and the
benchmark measured the client, not the server. This one is an asyncio Protocol on uvloop
that parses server frames (unmasked, RFC 6455 5.2) by hand: a few microseconds a frame.
It speaks just enough: the upgrade handshake, masked client text frames, pong for the
server's pings, and close. Used only by benchmarks/subscribers.py.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
import struct
import time
from collections.abc import Callable

import orjson

OnText = Callable[[bytes, float], None]


def _mask(payload: bytes, opcode: int) -> bytes:
    key = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    masked = bytes(b ^ key[i & 3] for i, b in enumerate(payload))
    return head + key + masked


class LeanSocket(asyncio.Protocol):
    def __init__(self, host: str, port: int, path: str, on_text: OnText) -> None:
        self.request = (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
        ).encode()
        self.on_text = on_text
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.upgraded = asyncio.get_running_loop().create_future()
        self.closed = asyncio.get_running_loop().create_future()
        self.inbox: asyncio.Queue[bytes] | None = asyncio.Queue()  # until `stream()`
        self.close_code: int | None = None
        self.retries = 0  # subscribes refused by admission control (OVERLOADED), then resent

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        buf = self.buffer + data if self.buffer else data
        if not self.upgraded.done():
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = buf
                return
            status = buf[: buf.find(b"\r\n")]
            if b" 101 " not in status:
                self.upgraded.set_exception(RuntimeError(status.decode(errors="replace")))
                return
            self.upgraded.set_result(None)
            buf = buf[end + 4 :]
        pos = 0
        size = len(buf)
        while size - pos >= 2:
            b0, b1 = buf[pos], buf[pos + 1]
            n = b1 & 0x7F
            head = 2
            if n == 126:
                if size - pos < 4:
                    break
                n = struct.unpack_from("!H", buf, pos + 2)[0]
                head = 4
            elif n == 127:
                if size - pos < 10:
                    break
                n = struct.unpack_from("!Q", buf, pos + 2)[0]
                head = 10
            if size - pos < head + n:
                break
            payload = buf[pos + head : pos + head + n]
            pos += head + n
            opcode = b0 & 0x0F
            if opcode == 0x1:
                if self.inbox is not None:
                    self.inbox.put_nowait(payload)
                else:
                    self.on_text(payload, now)
            elif opcode == 0x9 and self.transport is not None:  # ping: pong the same data
                self.transport.write(_mask(payload, 0xA))
            elif opcode == 0x8:
                self.close_code = struct.unpack_from("!H", payload)[0] if len(payload) >= 2 else 0
                if self.transport is not None:
                    self.transport.close()
        self.buffer = buf[pos:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(exc or ConnectionError("closed during the upgrade"))
        if not self.closed.done():
            self.closed.set_result(None)

    def send_json(self, message: object) -> None:
        assert self.transport is not None
        self.transport.write(_mask(orjson.dumps(message), 0x1))

    async def receive(self, seconds: float = 30.0) -> dict[str, object]:
        assert self.inbox is not None
        return dict(orjson.loads(await asyncio.wait_for(self.inbox.get(), seconds)))

    def stream(self) -> None:
        """From now on text frames go to `on_text` as they arrive (no queue, no task)."""
        inbox, self.inbox = self.inbox, None
        while inbox is not None and not inbox.empty():
            self.on_text(inbox.get_nowait(), time.time())

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_mask(struct.pack("!H", 1000), 0x8))
            self.transport.close()


async def open_lean(
    host: str,
    port: int,
    token: str,
    subscribe: dict[str, object],
    on_text: OnText,
    source: str | None = None,
) -> LeanSocket:
    """Connected (from `source`, a local address, when given), acknowledged, subscribed,
    first `next` received; then streaming."""
    loop = asyncio.get_running_loop()
    _, sock = await loop.create_connection(
        lambda: LeanSocket(host, port, "/graphql", on_text),
        host,
        port,
        local_addr=(source, 0) if source else None,
    )
    await asyncio.wait_for(sock.upgraded, 60)
    sock.send_json({"type": "connection_init", "payload": {"Authorization": token}})
    ack = await sock.receive()
    if ack.get("type") != "connection_ack":
        raise RuntimeError(f"not acknowledged: {ack}")
    for _ in range(30):
        sock.send_json(subscribe)
        first = await sock.receive()
        if first.get("type") == "next":
            break
        retry = _retry_after(first)
        if retry is None:
            raise RuntimeError(f"no first frame: {first}")
        # Admission control refused the subscribe (OVERLOADED, nothing ran): as a client
        # should, wait `retryAfter` and send it again on the same socket.
        sock.retries += 1
        await asyncio.sleep(retry * (0.5 + random.random()))
    else:
        raise RuntimeError("still refused after 30 attempts")
    sock.stream()
    return sock


def _retry_after(message: dict[str, object]) -> float | None:
    payload = message.get("payload")
    if message.get("type") != "error" or not isinstance(payload, list) or not payload:
        return None
    extensions = payload[0].get("extensions") if isinstance(payload[0], dict) else None
    if not isinstance(extensions, dict) or extensions.get("code") != "OVERLOADED":
        return None
    return float(extensions.get("retryAfter") or 1)
