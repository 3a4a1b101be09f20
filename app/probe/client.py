"""The probe's only way in: the public API. GraphQL over HTTP (httpx) with the registered
documents named by their hashes (GET /graphql/documents.json, or computed here where it is
not served: works with TRUSTED_DOCUMENTS_ONLY too), and `feedUpdates` over the websocket
(graphql-transport-ws).

Every answer carries the monotonic time its request was sent: the leak rule counts only
reads sent after a change was acknowledged (app.probe.ledger)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from app.constants import PROBE_USER_AGENT
from app.probe.constants import ATTEMPTS, RETRY_CAP_SECONDS
from app.probe.documents import local_document_ids

PROTOCOL = "graphql-transport-ws"
DOCUMENTS_PATH = "/graphql/documents.json"
RETRYABLE = ("OVERLOADED", "UNAVAILABLE")
USER_AGENT = f"{PROBE_USER_AGENT}/1"


class ProbeError(Exception):
    """The round cannot go on as planned (transport failure, refusal, unexpected answer)."""


class GraphQLFailure(ProbeError):
    """A GraphQL error answer: its `extensions.code` and message."""

    def __init__(self, operation: str, code: str, message: str, retry_after: float | None) -> None:
        super().__init__(f"{operation}: {code}: {message}")
        self.code = code
        self.retry_after = retry_after


@dataclass(frozen=True)
class Answer:
    data: dict[str, Any]
    sent: float  # time.monotonic() right before the (last) request went out
    received: float


class Api:
    """GraphQL over HTTP against one deployment."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        # Its User-Agent marks its requests as routine in the service's logs (quiet_logs).
        self.http = httpx.AsyncClient(
            base_url=self.url, timeout=timeout, headers={"User-Agent": USER_AGENT}
        )
        self.documents: dict[str, str] = {}

    @property
    def ws_url(self) -> str:
        scheme, rest = self.url.split("://", 1)
        return ("wss" if scheme == "https" else "ws") + "://" + rest + "/graphql"

    async def close(self) -> None:
        await self.http.aclose()

    async def ready(self) -> bool:
        """/readyz answers 200: PostgreSQL, Redis and a worker of every lane are up (a round
        before the workers run would count its posts lost)."""
        try:
            return (await self.http.get("/readyz")).status_code == 200
        except httpx.HTTPError:
            return False

    async def load_documents(self) -> None:
        """Operation name -> documentId, as the server lists them; computed here from
        graphql/operations/ where it does not (the production profile: 404)."""
        try:
            reply = await self.http.get(DOCUMENTS_PATH)
            if reply.status_code == 404:
                self.documents = local_document_ids()
                return
            reply.raise_for_status()
            self.documents = dict(reply.json())
        except (httpx.HTTPError, ValueError) as exc:
            raise ProbeError(f"GET {DOCUMENTS_PATH}: {exc!r}") from exc

    def document_id(self, operation: str) -> str:
        try:
            return self.documents[operation]
        except KeyError:
            raise ProbeError(f"the server registers no {operation} document") from None

    async def call(
        self, operation: str, variables: dict[str, Any], token: str | None = None
    ) -> Answer:
        """One operation; retried (at most ATTEMPTS, within a few seconds) when the server
        says it did not run it (OVERLOADED, UNAVAILABLE) or the connection failed."""
        body = {
            "documentId": self.document_id(operation),
            "operationName": operation,
            "variables": variables,
        }
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        for attempt in range(1, ATTEMPTS + 1):
            sent = time.monotonic()
            try:
                reply = await self.http.post("/graphql", json=body, headers=headers)
            except httpx.TransportError as exc:
                if attempt == ATTEMPTS:
                    raise ProbeError(f"{operation}: {exc!r}") from exc
                await asyncio.sleep(0.5)
                continue
            try:
                return _answer(operation, reply, sent)
            except GraphQLFailure as failure:
                if attempt == ATTEMPTS or failure.code not in RETRYABLE:
                    raise
                await asyncio.sleep(min(RETRY_CAP_SECONDS, failure.retry_after or 0.5))
        raise AssertionError("unreachable")


def _answer(operation: str, reply: httpx.Response, sent: float) -> Answer:
    received = time.monotonic()
    try:
        payload = reply.json()
    except ValueError:
        raise ProbeError(f"{operation}: HTTP {reply.status_code}, not JSON") from None
    errors = payload.get("errors") if isinstance(payload, dict) else None
    if errors:
        first = errors[0]
        extensions = first.get("extensions") or {}
        raise GraphQLFailure(
            operation,
            str(extensions.get("code", f"HTTP {reply.status_code}")),
            str(first.get("message", "")),
            extensions.get("retryAfter"),
        )
    if reply.status_code != 200 or not isinstance(payload.get("data"), dict):
        raise ProbeError(f"{operation}: HTTP {reply.status_code}: {payload!r:.200}")
    return Answer(payload["data"], sent, received)


class Updates:
    """One canary's `feedUpdates` subscription: the latest count, and an event set when a frame
    announces new posts (the probe then reads the feed at once, not at its next poll)."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.count = 0
        self.frames = 0
        self.arrived = asyncio.Event()
        self.error: str | None = None
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, api: Api, token: str) -> Updates:
        try:
            ws = await connect(
                api.ws_url,
                subprotocols=[PROTOCOL],  # type: ignore[list-item]
                open_timeout=10,
                max_size=2**16,
                user_agent_header=USER_AGENT,
            )
        except (OSError, WebSocketException, TimeoutError) as exc:
            raise ProbeError(f"the websocket failed: {exc!r}") from exc
        try:
            init = {"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}}
            await ws.send(json.dumps(init))
            ack = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if ack.get("type") != "connection_ack":
                raise ProbeError(f"the websocket answered {ack!r:.200} instead of connection_ack")
            subscribe = {
                "id": "1",
                "type": "subscribe",
                "payload": {
                    "query": "",
                    "documentId": api.document_id("FeedUpdates"),
                    "operationName": "FeedUpdates",
                },
            }
            await ws.send(json.dumps(subscribe))
        except (ConnectionClosed, TimeoutError, ValueError) as exc:
            await ws.close()
            raise ProbeError(f"the websocket failed: {exc!r}") from exc
        except BaseException:
            await ws.close()
            raise
        return cls(ws)

    @property
    def closed(self) -> bool:
        return self._reader.done()

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                message = json.loads(raw)
                kind = message.get("type")
                if kind == "ping":
                    await self.ws.send(json.dumps({"type": "pong"}))
                elif kind == "next" and not message["payload"].get("errors"):
                    self.count = int(message["payload"]["data"]["feedUpdates"]["newPostCount"])
                    self.frames += 1
                    if self.count > 0:  # not the zero a first page's reset announces
                        self.arrived.set()
                elif kind in ("next", "error", "complete"):
                    self.error = f"{kind}: {message.get('payload')!r:.200}"
                    return
        except (ConnectionClosed, ValueError, KeyError, TypeError) as exc:
            self.error = repr(exc)
        finally:
            self.arrived.set()  # nobody waits on a dead socket

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
        with contextlib.suppress(Exception):
            await self.ws.close()
