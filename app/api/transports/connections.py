"""Connection guards uvicorn lacks: a deadline and a size bound for each request's head, and
a cap on the open HTTP connections of one client address (docs/decisions/0016).

Why here and not in the ASGI app: an ASGI app first hears of a request once its head is
complete, and never of a connection. Before that, uvicorn (httptools) waits as long as a
client likes: a fresh connection that sends nothing, or a head sent a byte at a time, is
held forever (its keep-alive timer runs only between requests, and any byte resets it),
and the request line and headers are buffered without a bound. Each such connection costs
a file descriptor and a buffer, so a few thousand of them stop the process accepting.

`make run` (devtools.launcher) serves with
`uvicorn --http app.api.transports.connections:GuardedHttpTools`:

- a request's head must be complete within REQUEST_HEADER_TIMEOUT_SECONDS of the connection's
  start (or of the first byte of the next request on a kept-alive connection): past it, the
  connection is answered 408 and closed (closed silently when nothing came at all);
- a head over HEAD_BYTES is answered 431 and closed;
- an address with MAX_CONNECTIONS_PER_CLIENT connections open gets, on one more, a 429
  `RATE_LIMITED` answer to its request (JSON error body, `Retry-After`) and the connection
  closed. The address is the peer's, the only one known before a request is read, counted
  as every per-address budget counts it (app.client_address: an IPv6 peer by its /64). Peers
  uvicorn trusts as proxies (`--forwarded-allow-ips`, default 127.0.0.1 and ::1: the same
  list that decides whose X-Forwarded-For becomes the client address of the rate limits)
  are not capped: behind a reverse proxy every client shares the proxy's address, and the
  per-client cap belongs at the proxy.

The limits come from the settings the app hands over at start-up: app.web's lifespan yields
them as lifespan state under SETTINGS_STATE_KEY, and uvicorn passes that state to each
connection's protocol (its `app_state`), so this module reads no settings of its own.

The body's own deadline is the app's (transports.admission): the body of a GraphQL request is read
before it takes an admission slot. Websockets leave the count when they upgrade (their caps
are the realtime layer's).
"""

from __future__ import annotations

import asyncio
from collections import Counter as Tally
from functools import cache, lru_cache
from typing import Any

import orjson
from prometheus_client import Counter
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.transports.constants import CONNECTIONS_RETRY_AFTER_SECONDS as RETRY_AFTER_SECONDS
from app.api.transports.constants import HEAD_SLACK_BYTES
from app.api.upstream.uvicorn import HttpToolsProtocol, TrustedHosts
from app.client_address import PEER_STATE_KEY, budget_address
from app.config import Settings
from app.errors import RateLimited

SETTINGS_STATE_KEY = (
    "app.api.transports.connections.settings"  # in the ASGI lifespan state (app.web)
)

REFUSED = Counter(
    "feed_connections_refused_total",
    "HTTP connections answered and closed by the connection guards, by why",
    ["reason"],  # per_client_cap, header_timeout, head_too_large
)

_open: Tally[str] = Tally()  # this process's open HTTP connections per client address key


@lru_cache(maxsize=4)
def _trusted_proxies(allowed: str | tuple[str, ...]) -> TrustedHosts:
    return TrustedHosts(list(allowed) if isinstance(allowed, tuple) else allowed)


def _too_many_connections_body(cap: int) -> bytes:
    message = (
        f"Too many open connections from your address (at most {cap} per API process): "
        "reuse one connection for your requests."
    )
    extensions = {"code": RateLimited.code, "retryAfter": RETRY_AFTER_SECONDS}
    return orjson.dumps({"errors": [{"message": message, "extensions": extensions}]})


@cache
def _too_many_connections(cap: int) -> ASGIApp:
    """The ASGI app answering every request of a connection over the cap."""
    body = _too_many_connections_body(cap)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
        (b"connection", b"close"),
    ]

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return refuse


def _plain(status: str, message: str) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(message)}\r\nconnection: close\r\n\r\n{message}"
    ).encode()


class GuardedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with the guards of the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = self.app_state.get(SETTINGS_STATE_KEY)
        if not isinstance(settings, Settings):
            raise RuntimeError(
                "GuardedHttpTools serves app.web's app: its lifespan hands the settings over"
            )
        self.head_timeout = settings.request_header_timeout_seconds
        self.head_bytes_max = settings.max_request_bytes + HEAD_SLACK_BYTES
        self.per_client = settings.max_connections_per_client
        self.ipv6_prefix = settings.client_ipv6_prefix
        self._deadline: asyncio.TimerHandle | None = None
        self._counted: str | None = None  # the address this connection counts against
        self._head_bytes = 0
        self._head_started = False
        self._head_too_large = False

    # -- the per-address cap

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = self.client[0] if self.client else None
        if peer is not None and self.per_client > 0 and not self._trusted(peer):
            address = budget_address(peer, self.ipv6_prefix)
            if _open[address] >= self.per_client:
                REFUSED.labels("per_client_cap").inc()
                self.app = _too_many_connections(self.per_client)  # this connection only
            else:
                _open[address] += 1
                self._counted = address
        self._arm()

    def _trusted(self, address: str) -> bool:
        """A proxy uvicorn takes X-Forwarded-For from (its connections carry many clients)."""
        config = self.config
        allowed = config.forwarded_allow_ips
        key = tuple(allowed) if isinstance(allowed, list) else allowed
        return config.proxy_headers and address in _trusted_proxies(key)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._uncount()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self) -> None:
        self._uncount()  # a websocket now: the realtime layer's caps apply
        super().handle_websocket_upgrade()

    def _uncount(self) -> None:
        address, self._counted = self._counted, None
        if address is not None:
            _open[address] -= 1
            if _open[address] <= 0:
                del _open[address]

    # -- the head's deadline and size

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.client:  # the peer, before any X-Forwarded-For rewrite (app.client_address)
            self.scope["state"][PEER_STATE_KEY] = self.client[0]
        self._head_bytes = 0
        self._head_started = True
        if self._deadline is None:  # a kept-alive connection's next request
            self._arm()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm()
        self._head_started = False
        super().on_headers_complete()

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.head_bytes_max:
            self._head_too_large = True
            raise ValueError("request head too large")  # the parser stops: send_400_response

    def send_400_response(self, msg: str) -> None:
        if not self._head_too_large:
            super().send_400_response(msg)
            return
        REFUSED.labels("head_too_large").inc()
        message = f"Request line and headers over {self.head_bytes_max} bytes."
        self.transport.write(_plain("431 Request Header Fields Too Large", message))
        self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm()  # a request runs (a pipelined head waits behind it): look again later
            return
        if self._head_started:
            REFUSED.labels("header_timeout").inc()
            message = f"The request head did not arrive within {self.head_timeout:g} s."
            self.transport.write(_plain("408 Request Timeout", message))
        self.transport.close()
