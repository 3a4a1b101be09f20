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

Only requests that run GraphQL over HTTP are counted: websockets (long-lived; their frames
are not requests), /healthz, /metrics, the demo page, GraphiQL's page and its assets pass
untouched. MAX_IN_FLIGHT=0 turns the limit off.

Sizing (measured on 2 cores shared with other work, 50 closed-loop clients of RANKED and
CHRONOLOGICAL first pages): 16 in flight served as many pages per second as 32 or 64 or
more, at a p99 of 1.0-1.2 s against their 1.6-2.6 s, and left the read path's Redis
timeouts nearly idle; past ~16 the process only queues work inside itself, where every
await waits behind it.

A plain ASGI middleware, added in app.web's middleware list (outermost: a refused request
costs no routing, no body read, no GraphQL parse).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

import orjson
from prometheus_client import Counter
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import Overloaded

REFUSED = Counter(
    "feed_admission_refused_total",
    "GraphQL HTTP requests answered 503 OVERLOADED by admission control, by why",
    ["reason"],  # queue_full: refused on arrival; wait_budget: waited ADMISSION_WAIT_MS
)

RETRY_AFTER_SECONDS = 1
QUEUE_FACTOR = 4  # requests that may wait for a slot, per slot
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


def _runs_graphql(scope: Scope) -> bool:
    """A GraphQL HTTP request: POST /graphql, or GET /graphql with a query string (a plain
    GET is GraphiQL's page)."""
    if scope["type"] != "http" or scope["path"].rstrip("/") != "/graphql":
        return False
    return scope["method"] != "GET" or bool(scope.get("query_string"))


class Admission:
    """The ASGI middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, max_in_flight: int, wait_ms: int) -> None:
        self.app = app
        self.slots = (
            Slots(max_in_flight, wait_ms / 1000, max_waiting=QUEUE_FACTOR * max_in_flight)
            if max_in_flight > 0
            else None
        )
        self._refused = {r: REFUSED.labels(r) for r in ("queue_full", "wait_budget")}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        slots = self.slots
        if slots is None or not _runs_graphql(scope):
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
