"""Admission control: at most MAX_IN_FLIGHT GraphQL HTTP requests run at once per process.

Why: past capacity, an event loop with ever more requests in flight makes every one of them
slower, and the read path's per-source timeouts then fire on the loop's own backlog and
switch reads to their costlier PostgreSQL fallbacks (more work for a process that is
already behind). Bounding the requests in flight bounds the backlog, so the latency of the
requests that run stays close to their latency at capacity, and the excess is told at once
to come back later.

A request over the bound waits in a FIFO queue for at most ADMISSION_WAIT_MS; the queue holds
at most QUEUE_FACTOR x MAX_IN_FLIGHT requests. Waiting there costs nothing and trips no
timeout, unlike waiting inside the process, so MAX_IN_FLIGHT can sit near the concurrency
at which a process stops getting faster (its database pool, 10, plus the requests busy in
Python) and the queue absorbs the rest of a burst. A request that finds the queue full, or
that is still waiting when its budget runs out, is answered HTTP 503 with `Retry-After` and
a GraphQL error body whose `extensions.code` is OVERLOADED (retryable: nothing was run).

Requests that run GraphQL over HTTP are counted, and each operation sent over a websocket
(app.api.endpoint.websocket takes a slot through SLOTS_SCOPE_KEY; the socket itself holds none);
/healthz, /metrics, the demo page, GraphiQL's page and its assets pass untouched.
MAX_IN_FLIGHT=0 turns the limit off.

Sizing (measured on 2 cores shared with other work, 50 closed-loop clients of RANKED and
CHRONOLOGICAL first pages): 16 in flight served as many pages per second as 32 or 64 or
more, at a p99 of 1.0-1.2 s against their 1.6-2.6 s, and left the read path's Redis
timeouts nearly idle; past ~16 the process only queues work inside itself, where every
await waits behind it.

Input first, then a slot: a request's body is read (at most MAX_REQUEST_BYTES, within
REQUEST_BODY_TIMEOUT_SECONDS of its headers) before it may take a slot or a place in the
queue. A client that declares a body and sends it slowly, or never, then holds a connection
and a small task until its deadline, never a slot: 40 such uploads used to hold all 16 slots
(and the queue behind them) and every other client got 503 (docs/decisions/0016). A body
that is too big is answered 413, one too slow 408, a GET query string over
MAX_REQUEST_BYTES 414, each with a BAD_USER_INPUT error body and `Connection: close`.

A plain ASGI middleware, added in app.web's middleware list (outermost: a refused request
costs no routing and no GraphQL parse).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

import orjson
from prometheus_client import Counter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.transports.constants import OVERLOADED_RETRY_AFTER_SECONDS, QUEUE_FACTOR
from app.api.transports.route_path import route_path
from app.errors import BadInput, Overloaded

REFUSED = Counter(
    "feed_admission_refused_total",
    "GraphQL HTTP requests answered 503 OVERLOADED by admission control, by why",
    ["reason"],  # queue_full: refused on arrival; wait_budget: waited ADMISSION_WAIT_MS
)

INPUT_REASONS = ("body_too_large", "body_timeout", "query_string_too_long")
INPUT_REFUSED = Counter(
    "feed_http_input_refused_total",
    "GraphQL HTTP requests refused before admission for their input (413, 408, 414), by why",
    ["reason"],
)

RETRY_AFTER_SECONDS = OVERLOADED_RETRY_AFTER_SECONDS  # the websocket's OVERLOADED says it too
# Where a websocket finds the process's slots: each operation sent over a socket takes one
# like an HTTP request (app.api.endpoint.websocket), so sockets cannot run work past admission.
SLOTS_SCOPE_KEY = "feed.admission_slots"
MESSAGE = "The server is at capacity and did not run this request; retry in a moment."
_BODY = orjson.dumps({"errors": [{"message": MESSAGE, "extensions": {"code": Overloaded.code}}]})
_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(_BODY)).encode()),
    (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
]


class Slots:
    """`limit` slots, a FIFO of at most `max_waiting` waiters, each waiting `wait_seconds` at
    most. A released slot goes straight to the oldest waiter (no barging)."""

    def __init__(self, limit: int, wait_seconds: float, max_waiting: int) -> None:
        self.limit = limit
        self.wait_seconds = wait_seconds
        self.max_waiting = max_waiting
        self.in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self) -> str | None:
        """None once a slot is held; else why not ("queue_full", "wait_budget")."""
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            return None
        if self.wait_seconds <= 0 or len(self._waiters) >= self.max_waiting:
            return "queue_full"
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(self.wait_seconds):
                await waiter
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():
                return None  # handed a slot as the budget ran out: take it
            self._forget(waiter)
            return "wait_budget"
        except BaseException:  # cancelled while waiting: give back a slot handed over
            if waiter.done() and not waiter.cancelled():
                self.release()
            else:
                self._forget(waiter)
            raise
        return None  # release() handed its slot over: in_flight already counts it

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.in_flight -= 1

    def _forget(self, waiter: asyncio.Future[None]) -> None:
        waiter.cancel()
        with contextlib.suppress(ValueError):  # popped by release() meanwhile
            self._waiters.remove(waiter)


def admission_slots(max_in_flight: int, wait_ms: int) -> Slots | None:
    """The process's slots for MAX_IN_FLIGHT and ADMISSION_WAIT_MS; None when off (0)."""
    if max_in_flight <= 0:
        return None
    return Slots(max_in_flight, wait_ms / 1000, max_waiting=QUEUE_FACTOR * max_in_flight)


def _runs_graphql(scope: Scope) -> bool:
    """A GraphQL HTTP request: POST /graphql, or GET /graphql with a query string (a plain
    GET is GraphiQL's page). The path as the router sees it: under a root path too."""
    if scope["type"] != "http" or route_path(scope).rstrip("/") != "/graphql":
        return False
    return scope["method"] != "GET" or bool(scope.get("query_string"))


def _bad_input(message: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers and body of an input refusal: a GraphQL error body, and the connection closed."""
    error = {"message": message, "extensions": {"code": BadInput.code}}
    body = orjson.dumps({"errors": [error]})
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # the rest of what the client sends is not read
    ]
    return headers, body


class BodyRefused(Exception):
    """The body was not read: `status` and `reason` say why (413 too big, 408 too slow)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


async def read_body(receive: Receive, scope: Scope, max_bytes: int, within: float) -> bytes | None:
    """The whole body, at most `max_bytes` and within `within` seconds; None when the client
    left first. Raises BodyRefused past either bound (at once when Content-Length says so)."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > max_bytes:
            raise BodyRefused(413, "body_too_large", f"Request body over {max_bytes} bytes.")
    chunks: list[bytes] = []
    received = 0
    try:
        async with asyncio.timeout(within if within > 0 else None):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                received += len(chunk)
                if received > max_bytes:
                    too_large = f"Request body over {max_bytes} bytes."
                    raise BodyRefused(413, "body_too_large", too_large)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        too_slow = (
            f"The request body did not arrive within {within:g} s of its headers: "
            "send the whole body at once."
        )
        raise BodyRefused(408, "body_timeout", too_slow) from None


def replay_body(body: bytes, receive: Receive) -> Receive:
    """`receive` for the app: the body already read, then the client's own messages (also
    app.api.fast.compiled_http's, which reads a body to decide and hands it on)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class Admission:
    """The ASGI middleware (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        max_in_flight: int,
        wait_ms: int,
        max_bytes: int,
        body_timeout_seconds: float,
        slots: Slots | None = None,
    ) -> None:
        self.app = app
        # `slots`: the process's, shared with the sockets served before this middleware
        # (app.web's live path); else its own.
        self.slots = slots if slots is not None else admission_slots(max_in_flight, wait_ms)
        self.max_bytes = max_bytes
        self.body_timeout = body_timeout_seconds
        self._refused = {r: REFUSED.labels(r) for r in ("queue_full", "wait_budget")}
        self._input_refused = {r: INPUT_REFUSED.labels(r) for r in INPUT_REASONS}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _runs_graphql(scope):
            if scope["type"] == "websocket" and self.slots is not None:
                scope[SLOTS_SCOPE_KEY] = self.slots  # operations over a socket take them too
            await self.app(scope, receive, send)
            return
        if len(scope.get("query_string", b"")) > self.max_bytes:
            message = f"Query string over {self.max_bytes} bytes: send the document by POST."
            await self._refuse(send, 414, "query_string_too_long", message)
            return
        if scope["method"] == "POST":
            try:
                body = await read_body(receive, scope, self.max_bytes, self.body_timeout)
            except BodyRefused as why:
                await self._refuse(send, why.status, why.reason, why.message)
                return
            if body is None:
                return  # the client left before sending its body: nobody to answer
            receive = replay_body(body, receive)
        slots = self.slots
        if slots is None:
            await self.app(scope, receive, send)
            return
        refused = await slots.acquire()
        if refused is not None:
            self._refused[refused].inc()
            await send({"type": "http.response.start", "status": 503, "headers": _HEADERS})
            await send({"type": "http.response.body", "body": _BODY})
            return
        try:
            await self.app(scope, receive, send)
        finally:
            slots.release()

    async def _refuse(self, send: Send, status: int, reason: str, message: str) -> None:
        self._input_refused[reason].inc()
        headers, body = _bad_input(message)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
