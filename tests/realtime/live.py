"""Real servers and real websocket clients for realtime tests.

`ApiServer` runs `uvicorn app.web:app` as a subprocess on a free port with the test
environment (conftest exported DATABASE_URL/REDIS_URL/thresholds into os.environ).
`LiveClient` speaks graphql-transport-ws with the `websockets` package, as a browser would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from app.api.documents import operations
from app.config import PROJECT_ROOT

PROTOCOL = "graphql-transport-ws"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ApiServer:
    def __init__(self, env: dict[str, str] | None = None, args: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/graphql"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.web:app", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning", *args],
            cwd=PROJECT_ROOT,
            env={**os.environ, **(env or {})},
        )  # fmt: skip

    async def ready(self, seconds: float = 20.0) -> ApiServer:
        deadline = time.monotonic() + seconds
        async with httpx.AsyncClient(base_url=self.base) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"uvicorn exited with {self.proc.returncode}")
                try:
                    if (await client.get("/healthz")).status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        raise TimeoutError("uvicorn did not become healthy")

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base, timeout=10)

    async def metric(self, name: str, labels: str = "") -> float:
        """One sample from /metrics (0 when absent)."""
        async with self.http() as client:
            text = (await client.get("/metrics")).text
        pattern = re.escape(name + (f"{{{labels}}}" if labels else "")) + r" ([0-9.e+-]+)"
        found = re.search(r"^" + pattern + "$", text, re.M)
        return float(found.group(1)) if found else 0.0

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class LiveClient:
    """One websocket with (optionally) one `feedUpdates` subscription."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @classmethod
    async def open(
        cls, server: ApiServer, token: str | None, *, subscribe: bool = True, **kwargs: Any
    ) -> LiveClient:
        ws = await connect(server.ws_url, subprotocols=[PROTOCOL], **kwargs)  # type: ignore[list-item]
        client = cls(ws)
        payload = {"authorization": f"Bearer {token}"} if token else {}
        await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
        ack = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert ack["type"] == "connection_ack", ack
        if subscribe:
            await client.subscribe()
        return client

    async def subscribe(self, op_id: str = "1") -> None:
        query = operations()["FeedUpdates"]
        await self.ws.send(
            json.dumps({"id": op_id, "type": "subscribe", "payload": {"query": query}})
        )

    async def next_update(self, seconds: float = 1.0) -> dict[str, Any]:
        """The next feedUpdates payload; fails after `seconds`."""
        while True:
            message = json.loads(await asyncio.wait_for(self.ws.recv(), seconds))
            if message["type"] == "ping":
                await self.ws.send(json.dumps({"type": "pong"}))
                continue
            assert message["type"] == "next", message
            assert "errors" not in message["payload"], message
            return dict(message["payload"]["data"]["feedUpdates"])

    async def until_count(self, count: int, seconds: float = 5.0) -> list[dict[str, Any]]:
        """Frames received until one carries `count` (all of them, that one last)."""
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + seconds
        while not frames or frames[-1]["newPostCount"] != count:
            frames.append(await self.next_update(max(0.01, deadline - time.monotonic())))
        return frames

    async def silent(self, within: float = 0.5) -> None:
        """Nothing arrives for `within` seconds."""
        try:
            message = await asyncio.wait_for(self.ws.recv(), within)
        except TimeoutError:
            return
        raise AssertionError(f"unexpected frame: {message!r}")

    async def close(self) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self.ws.close()
