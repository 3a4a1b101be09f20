"""The hub's one pub/sub connection: which channels it joined, Redis's confirmations, and
the way back after the connection is lost (on a cluster: to another node).

Why apart from the hub: this is the Redis side only (SUBSCRIBE, UNSUBSCRIBE, reconnects);
what a message means and who gets it is the hub's. The hub hands it three callbacks: whether
a channel is still wanted, what to do with a message, and that messages may have been lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection
from redis.exceptions import RedisError

from app.realtime.constants import (
    CONFIRM_TIMEOUT,
    NODE_CONNECT_TIMEOUT,
    NODE_HEALTH_CHECK_INTERVAL,
    RECONNECT_BACKOFF,
    RECONNECT_MAX_BACKOFF,
)
from app.redis_scripts import AnyRedis

log = logging.getLogger("app.realtime")

Message = dict[str, Any]


def pubsub_client(redis: AnyRedis, avoid: Redis | None = None) -> Redis:
    """Classic pub/sub on a cluster reaches every node, so any one node will do (redis-py's
    asyncio cluster client has no pubsub of its own; decision 0040): a known node other than
    `avoid` (the one whose connection was lost), else a seed node (before the client has
    met the cluster)."""
    if isinstance(redis, Redis):
        return redis
    nodes = [*redis.get_nodes()] or [*redis.nodes_manager.startup_nodes.values()]
    if avoid is not None:
        kwargs = avoid.connection_pool.connection_kwargs
        lost = (kwargs.get("host"), int(kwargs.get("port", 0)))
        nodes = [n for n in nodes if (n.host, int(n.port)) != lost] or nodes
    node = random.choice(nodes)
    return Redis(
        host=node.host,
        port=int(node.port),
        health_check_interval=NODE_HEALTH_CHECK_INTERVAL,
        socket_keepalive=True,
        socket_connect_timeout=NODE_CONNECT_TIMEOUT,
        **node_credentials(redis),
    )


def node_credentials(cluster: RedisCluster) -> dict[str, Any]:
    """The cluster client's credentials and TLS settings, for a plain connection to one of
    its nodes (no read timeout: a subscriber waits for messages)."""
    given = cluster.connection_kwargs
    out = {k: given[k] for k in ("username", "password", "credential_provider") if given.get(k)}
    if issubclass(given.get("connection_class", object), SSLConnection):
        out["ssl"] = True
        out.update({k: v for k, v in given.items() if k.startswith("ssl_") and v is not None})
    return out


class Listener:
    """One pub/sub connection per process, multiplexed over every channel the hub needs.

    `home` is a channel joined for as long as the listener runs (it keeps the connection
    subscribed while no user is); `wanted(channel)` says whether a channel is still needed
    when asked to leave it; `on_message` gets every published message; `on_lost` is called
    once the connection is back after a loss (messages may have been missed meanwhile).
    """

    def __init__(
        self,
        redis: AnyRedis,
        home: str,
        wanted: Callable[[str], bool],
        on_message: Callable[[Message], None],
        on_lost: Callable[[], None],
    ) -> None:
        self.redis = redis
        self.home = home
        self._wanted = wanted
        self._on_message = on_message
        self._on_lost = on_lost
        self.joined: set[str] = set()  # channels SUBSCRIBE was sent for
        self._confirm: dict[bytes, asyncio.Future[None]] = {}
        self.pubsub: PubSub | None = None
        self.client: Redis | None = None  # the connection's client (one node on a cluster)
        # PubSub.connect() is not safe to race: two first callers would each take a
        # connection, and one would hear confirmations nobody reads.
        self._send_lock = asyncio.Lock()
        self.running = False

    def open(self) -> None:
        """Pick the client; nothing is sent yet (the first SUBSCRIBE connects)."""
        self.client = pubsub_client(self.redis)
        self.pubsub = self.client.pubsub()
        self.running = True

    async def close(self) -> None:
        if self.pubsub is not None:
            with contextlib.suppress(RedisError, OSError):
                await self.pubsub.aclose()  # type: ignore[no-untyped-call]
                if self.client is not None and self.client is not self.redis:
                    await self.client.aclose()
            self.pubsub = None

    async def join(self, channel: str, *, wait: bool = True) -> None:
        await self.join_many([channel], wait=wait)

    async def join_many(self, channels: list[str], *, wait: bool = True) -> None:
        """SUBSCRIBE once per channel, all new ones in one command; wait for Redis to confirm
        each so nothing published after this returns is missed."""
        assert self.pubsub is not None
        waits: list[asyncio.Future[None]] = []
        new: list[str] = []
        for channel in channels:
            raw = channel.encode()
            if channel in self.joined:
                fut = self._confirm.get(raw)
            else:
                self.joined.add(channel)
                fut = asyncio.get_running_loop().create_future()
                self._confirm[raw] = fut
                new.append(channel)
            if fut is not None:
                waits.append(fut)
        if new:
            try:
                async with self._send_lock:
                    await self.pubsub.subscribe(*new)
            except BaseException:
                for channel in new:
                    self.joined.discard(channel)
                    self._confirm.pop(channel.encode(), None)
                raise
        if wait and waits:
            await asyncio.wait_for(asyncio.shield(asyncio.gather(*waits)), CONFIRM_TIMEOUT)

    async def leave(self, channels: list[str]) -> None:
        """UNSUBSCRIBE the channels nobody wants any more (none once stopping)."""
        assert self.pubsub is not None
        gone = [c for c in channels if c in self.joined and not self._wanted(c)]
        for c in gone:
            self.joined.discard(c)
            self._confirm.pop(c.encode(), None)
        if gone and self.running:
            with contextlib.suppress(RedisError, OSError):
                async with self._send_lock:
                    await self.pubsub.unsubscribe(*gone)

    async def repoint(self) -> None:
        """On a cluster, listen on another node after the connection to one was lost (a node
        stopped, a failover): every channel joined so far is joined there. A plain server's
        PubSub reconnects to its one address by itself."""
        if isinstance(self.redis, Redis) or self.pubsub is None:
            return
        old, old_client = self.pubsub, self.client
        async with self._send_lock:
            client = pubsub_client(self.redis, avoid=old_client)
            pubsub = client.pubsub()
            joined = sorted(self.joined)
            try:
                if joined:
                    await pubsub.subscribe(*joined)
            except BaseException:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                    await client.aclose()
                raise
            self.pubsub, self.client = pubsub, client
        log.warning("realtime pub/sub moved to cluster node %s", client.connection_pool)
        with contextlib.suppress(Exception):
            await old.aclose()  # type: ignore[no-untyped-call]
            if old_client is not None:
                await old_client.aclose()

    async def read_loop(self) -> None:
        """Read messages until cancelled; a lost connection is retried with backoff."""
        assert self.pubsub is not None
        backoff = RECONNECT_BACKOFF
        resync = False
        while True:
            try:
                if self.home not in self.joined:
                    await self.join(self.home, wait=False)
                message = await self.pubsub.get_message(timeout=None)
            except (RedisError, OSError):
                log.warning("realtime pub/sub connection lost; retrying", exc_info=True)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RECONNECT_MAX_BACKOFF)
                resync = True
                with contextlib.suppress(RedisError, OSError):
                    await self.repoint()
                continue
            backoff = RECONNECT_BACKOFF
            if resync:
                resync = False  # messages were lost while disconnected: re-read every count
                self._on_lost()
            if message is not None:
                try:
                    self._handle(message)
                except Exception:  # one bad message must not stop the process's live updates
                    log.exception("bad realtime message on %r", message.get("channel"))

    def _handle(self, message: Message) -> None:
        if message["type"] == "subscribe":
            fut = self._confirm.pop(message["channel"], None)
            if fut is not None and not fut.done():
                fut.set_result(None)
            return
        self._on_message(message)
