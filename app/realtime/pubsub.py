"""The hub's pub/sub connections: which channels it joined, Redis's confirmations, and the
way back after a connection is lost.

On a plain Redis, `Listener`: one connection, classic SUBSCRIBE. On a Redis Cluster,
`ShardedListener`: sharded pub/sub (SSUBSCRIBE, decision 0090), one connection per shard
holding one of the hub's channels, following slot moves and failovers; classic PUBLISH would
be copied to every node of the cluster (decision 0040).

Why apart from the hub: this is the Redis side only (subscribing, confirmations, reconnects);
what a message means and who gets it is the hub's. The hub hands it three callbacks: whether
a channel is still wanted, what to do with a message, and that messages may have been lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, RedisError

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


def node_credentials(cluster: RedisCluster) -> dict[str, Any]:
    """The cluster client's credentials and TLS settings, for a plain connection to one of
    its nodes (no read timeout: a subscriber waits for messages)."""
    given = cluster.connection_kwargs
    out = {k: given[k] for k in ("username", "password", "credential_provider") if given.get(k)}
    if issubclass(given.get("connection_class", object), SSLConnection):
        out["ssl"] = True
        out.update({k: v for k, v in given.items() if k.startswith("ssl_") and v is not None})
    return out


def claim(
    channels: list[str], joined: set[str], confirm: dict[bytes, asyncio.Future[None]]
) -> tuple[list[asyncio.Future[None]], list[str]]:
    """The confirmations to wait for and the channels not joined yet (marked joined now, each
    with a new confirmation): one listener's bookkeeping, plain or sharded."""
    waits: list[asyncio.Future[None]] = []
    new: list[str] = []
    for channel in channels:
        raw = channel.encode()
        if channel in joined:
            fut = confirm.get(raw)
        else:
            joined.add(channel)
            fut = asyncio.get_running_loop().create_future()
            confirm[raw] = fut
            new.append(channel)
        if fut is not None:
            waits.append(fut)
    return waits, new


class Listener:
    """One pub/sub connection per process on a plain Redis, multiplexed over every channel the
    hub needs.

    `home` is a channel joined for as long as the listener runs (it keeps the connection
    subscribed while no user is); `wanted(channel)` says whether a channel is still needed
    when asked to leave it; `on_message` gets every published message; `on_lost` is called
    once the connection is back after a loss (messages may have been missed meanwhile).
    """

    def __init__(
        self,
        redis: Redis,
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
        self.client: Redis | None = None  # the connection's client
        # PubSub.connect() is not safe to race: two first callers would each take a
        # connection, and one would hear confirmations nobody reads.
        self._send_lock = asyncio.Lock()
        self.running = False

    def open(self) -> None:
        """Pick the client; nothing is sent yet (the first SUBSCRIBE connects)."""
        self.client = self.redis
        self.pubsub = self.client.pubsub()
        self.running = True

    async def close(self) -> None:
        if self.pubsub is not None:
            with contextlib.suppress(RedisError, OSError):
                await self.pubsub.aclose()
            self.pubsub = None

    async def join(self, channel: str, *, wait: bool = True) -> None:
        await self.join_many([channel], wait=wait)

    async def join_many(self, channels: list[str], *, wait: bool = True) -> None:
        """SUBSCRIBE once per channel, all new ones in one command; wait for Redis to confirm
        each so nothing published after this returns is missed."""
        assert self.pubsub is not None
        waits, new = claim(channels, self.joined, self._confirm)
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
                resync = True  # the PubSub reconnects to its one address by itself
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


class HubListener(Protocol):
    """What the hub needs of its listener, plain or sharded."""

    running: bool
    joined: set[str]

    def open(self) -> None: ...

    async def close(self) -> None: ...

    async def join(self, channel: str, *, wait: bool = True) -> None: ...

    async def join_many(self, channels: list[str], *, wait: bool = True) -> None: ...

    async def leave(self, channels: list[str]) -> None: ...

    async def read_loop(self) -> None: ...


def make_listener(
    redis: AnyRedis,
    home: str,
    wanted: Callable[[str], bool],
    on_message: Callable[[Message], None],
    on_lost: Callable[[], None],
) -> HubListener:
    """Classic pub/sub on a plain Redis, sharded on a cluster (decision 0090)."""
    if isinstance(redis, RedisCluster):
        return ShardedListener(redis, wanted, on_message, on_lost)
    return Listener(redis, home, wanted, on_message, on_lost)


class _Shard:
    """One connection to one node, SSUBSCRIBEd to the hub's channels that node serves."""

    __slots__ = ("channels", "client", "name", "pubsub", "task")

    def __init__(self, name: str, client: Redis) -> None:
        self.name = name
        self.client = client
        self.pubsub: PubSub = client.pubsub()
        self.channels: set[str] = set()
        self.task: asyncio.Task[None] | None = None

    async def close(self) -> None:
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()
        with contextlib.suppress(RedisError, OSError):
            await self.pubsub.aclose()
            await self.client.aclose()


class ShardedListener:
    """Sharded pub/sub on a Redis Cluster: a connection per node serving one of the hub's
    channels, each read by its own task (a blocking read per socket; redis-py's
    ClusterPubSub polls its nodes in turn with a timeout instead).

    A channel leaves its node two ways: the node announces `sunsubscribe` (its slot moved to
    another node, or the node became a replica) or the connection is lost (the node died).
    Either way the channel is re-homed: the cluster client re-reads the slot map and the
    channel is SSUBSCRIBEd on the slot's master now, retried with backoff while the slot has
    none (a failover under way); `on_lost` follows, as messages may have been missed.
    """

    def __init__(
        self,
        redis: RedisCluster,
        wanted: Callable[[str], bool],
        on_message: Callable[[Message], None],
        on_lost: Callable[[], None],
    ) -> None:
        self.redis = redis
        self._wanted = wanted
        self._on_message = on_message
        self._on_lost = on_lost
        self.joined: set[str] = set()  # channels SSUBSCRIBE was sent (or is due) for
        self._confirm: dict[bytes, asyncio.Future[None]] = {}
        self._shards: dict[str, _Shard] = {}  # node name -> its connection
        self._owner: dict[str, str] = {}  # channel -> node name it is subscribed on
        self._homeless: set[str] = set()  # channels to subscribe again (read_loop)
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()  # one placement at a time: shards are made once
        self.running = False

    def shard_of(self, channel: str) -> Redis | None:
        """The client of the node `channel` is subscribed on (tests)."""
        shard = self._shards.get(self._owner.get(channel, ""))
        return shard.client if shard is not None else None

    def open(self) -> None:
        self.running = True

    async def close(self) -> None:
        shards, self._shards = list(self._shards.values()), {}
        readers = [s.task for s in shards if s.task is not None]
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        for shard in shards:
            await shard.close()

    async def join(self, channel: str, *, wait: bool = True) -> None:
        await self.join_many([channel], wait=wait)

    async def join_many(self, channels: list[str], *, wait: bool = True) -> None:
        """SSUBSCRIBE each new channel on the master of its slot; wait for the confirmations
        so nothing published after this returns is missed."""
        waits, new = claim(channels, self.joined, self._confirm)
        if new:
            try:
                await self._place(new)
            except BaseException:
                for channel in new:
                    self.joined.discard(channel)
                    self._confirm.pop(channel.encode(), None)
                raise
        if wait and waits:
            await asyncio.wait_for(asyncio.shield(asyncio.gather(*waits)), CONFIRM_TIMEOUT)

    async def _place(self, channels: list[str]) -> None:
        """SSUBSCRIBE the channels where the slot map says, one command per slot (a command's
        channels must share a slot)."""
        try:
            await self.redis.initialize()  # a no-op once the slot map is read
        except RedisClusterException as exc:  # app.redis_client.Cluster raises a RedisError
            raise RedisError(str(exc)) from exc
        by_node: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
        nodes: dict[str, Any] = {}
        for channel in channels:
            try:
                node = self.redis.get_node_from_key(channel)
            except RedisClusterException as exc:  # the slot has no master (failover under way)
                raise RedisError(f"no master for {channel}") from exc
            if node is None:
                raise RedisError(f"no master for {channel}")
            nodes[node.name] = node
            by_node[node.name][key_slot(channel.encode())].append(channel)
        async with self._lock:
            for name, slots in by_node.items():
                shard = self._shard(nodes[name])
                try:
                    for group in slots.values():
                        await shard.pubsub.ssubscribe(*group)
                        shard.channels.update(group)
                        for channel in group:
                            self._owner[channel] = name
                except BaseException:
                    if shard.task is None:  # never connected: a node that is gone
                        self._shards.pop(name, None)
                        await shard.close()
                    raise
                if shard.task is None:  # read once its first SSUBSCRIBE connected it
                    shard.task = asyncio.create_task(self._read(shard), name=f"realtime-{name}")

    def _shard(self, node: Any) -> _Shard:
        shard = self._shards.get(node.name)
        if shard is None:
            client = Redis(
                host=node.host,
                port=int(node.port),
                health_check_interval=NODE_HEALTH_CHECK_INTERVAL,
                socket_keepalive=True,
                socket_connect_timeout=NODE_CONNECT_TIMEOUT,
                protocol=2,  # as the other clients (app.redis_client.PROTOCOL)
                # No retry of its own: a lost node's channels are re-homed by the slot map,
                # not subscribed again on the same address (which may serve them no more).
                retry=Retry(NoBackoff(), 0),
                **node_credentials(self.redis),
            )
            shard = self._shards[node.name] = _Shard(node.name, client)
        return shard

    async def leave(self, channels: list[str]) -> None:
        """SUNSUBSCRIBE the channels nobody wants any more (none once stopping)."""
        gone = [c for c in channels if c in self.joined and not self._wanted(c)]
        by_shard: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
        for c in gone:
            self.joined.discard(c)
            self._confirm.pop(c.encode(), None)
            self._homeless.discard(c)
            name = self._owner.pop(c, None)
            if name is not None:
                by_shard[name][key_slot(c.encode())].append(c)
        if not self.running:
            return
        for name, slots in by_shard.items():
            shard = self._shards.get(name)
            if shard is None:
                continue
            for group in slots.values():
                shard.channels.difference_update(group)
                with contextlib.suppress(RedisError, OSError):
                    async with self._lock:
                        await shard.pubsub.sunsubscribe(*group)

    async def _read(self, shard: _Shard) -> None:
        """One shard's messages until its connection is lost; then its channels are
        re-homed (read_loop)."""
        try:
            while True:
                message = await shard.pubsub.get_message(timeout=None)
                if message is not None:
                    self._handle(shard, message)
        except (RedisError, OSError):
            if self._shards.get(shard.name) is shard:
                log.warning("realtime shard %s lost; re-homing its channels", shard.name)
                del self._shards[shard.name]
                self._rehome(shard.channels)
                await shard.close()

    def _handle(self, shard: _Shard, message: Message) -> None:
        kind = message["type"]
        if kind == "smessage":
            try:
                self._on_message({**message, "type": "message"})
            except Exception:  # one bad message must not stop the process's live updates
                log.exception("bad realtime message on %r", message.get("channel"))
        elif kind == "ssubscribe":
            fut = self._confirm.pop(message["channel"], None)
            if fut is not None and not fut.done():
                fut.set_result(None)
        elif kind == "sunsubscribe":
            channel = message["channel"].decode()
            shard.pubsub.shard_channels.pop(message["channel"], None)
            # Not asked for: the slot left this node (moved, or the node is a replica now).
            if channel in self.joined and self._owner.get(channel) == shard.name:
                shard.channels.discard(channel)
                self._rehome([channel])

    def _rehome(self, channels: Any) -> None:
        self._homeless.update(c for c in channels if c in self.joined)
        for channel in self._homeless:
            self._owner.pop(channel, None)
        self._wake.set()

    async def read_loop(self) -> None:
        """Re-home lost channels until cancelled: re-read the slot map, SSUBSCRIBE where it
        says, retry with backoff while a slot has no reachable master."""
        backoff = RECONNECT_BACKOFF
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                homeless = sorted(c for c in self._homeless if c in self.joined)
                self._homeless.clear()
                if not homeless:
                    continue
                try:
                    await self.redis.nodes_manager.initialize()
                    await self._place(homeless)
                except (RedisError, RedisClusterException, OSError):  # no node, uncovered slot
                    log.warning("realtime channels not re-homed yet; retrying", exc_info=True)
                    self._homeless.update(homeless)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, RECONNECT_MAX_BACKOFF)
                    self._wake.set()
                    continue
                backoff = RECONNECT_BACKOFF
                log.warning("realtime channels re-homed: %d", len(homeless))
                self._on_lost()  # messages may have been missed meanwhile: re-read every count
        finally:
            for shard in list(self._shards.values()):
                if shard.task is not None:
                    shard.task.cancel()
