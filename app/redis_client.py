"""Redis connections: one client per Redis role and URL per process, decoded responses off
(ids are bytes on the wire).

Roles (`RedisRoles`, decision 0041): timelines, sessions, queue, pubsub, limits, each on its
own URL setting (REDIS_<ROLE>_URL, empty = REDIS_URL). Roles on one URL share one client, so
one REDIS_URL is one pool, as before roles existed. `redis+cluster://` / `rediss+cluster://`
URLs get a RedisCluster (any node is a seed); the queue role refuses one (ARQ needs a plain
server). `redis+sentinel://` URLs get the master a set of Sentinels names (`master_for`:
every new connection asks them, so a failover is followed without a restart; decision
0091), the queue role's way to survive its server. Built here and handed down by the
composition roots (app/state.py, app/web.py, jobs/worker.py, jobs/relay.py); nothing else
opens a connection.

Every command and connect has a timeout (REDIS_SOCKET_TIMEOUT_SECONDS,
REDIS_CONNECT_TIMEOUT_SECONDS): a hung or unreachable Redis fails a call in seconds, with a
RedisError the callers already degrade on, instead of hanging the request. Pub/sub is the one
exception: a subscriber's read waits for the next message by design, so `pubsub()` draws
from a second pool without the read timeout (keep-alive and health checks still find a dead
server).

Commands are packed by hiredis where the `hiredis` wheel is installed: redis-py 8's asyncio
connections do it themselves (5.3's packed in Python, ~2 ms of worker CPU per 1,000-key fan-out
EVALSHA against ~0.3 ms with hiredis, docs/benchmarks/archive.md "commands packed by hiredis";
this module had its own `PackedConnection` for it until redis-py 8, decision 0090).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError

from app.config import (
    CLUSTER_SCHEMES,
    REDIS_ROLES,
    RedisRole,
    SentinelTarget,
    Settings,
    is_cluster_url,
    is_sentinel_url,
    parse_sentinel_url,
)
from app.redis_scripts import AnyRedis

log = logging.getLogger("app.redis_client")


class TimedRedis(Redis):
    """A client whose commands time out but whose pub/sub connections do not."""

    listen_pool: ConnectionPool | None = None

    def pubsub(self, **kwargs: Any) -> PubSub:
        pool = self.listen_pool or self.connection_pool
        return PubSub(pool, event_dispatcher=self._event_dispatcher, **kwargs)

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        if self.listen_pool is not None:
            await self.listen_pool.disconnect()


# RedisClusterException messages that mean "the cluster is out of reach or not serving every
# slot" (redis-py's NodesManager.initialize), not a programming error.
_OUTAGES = ("Redis Cluster cannot be connected", "All slots are not covered", "could not agree")


class ClusterUnavailable(RedisConnectionError):
    """The cluster could not be reached or mapped: a RedisError, as a plain server's outage."""


class Cluster(RedisCluster):
    """redis-py's cluster client whose outages are RedisErrors.

    redis-py raises RedisClusterException, which is not a RedisError, when no node answers
    or the slots are not covered (at first use, or when it maps the cluster again after a
    failover). Every caller here degrades on RedisError (the feed from PostgreSQL, limits
    counted in process, live updates later); this keeps it so on a cluster."""

    async def initialize(self, *args: Any, **kwargs: Any) -> RedisCluster:
        try:
            return await super().initialize(*args, **kwargs)
        except RedisClusterException as exc:
            raise _unavailable(exc) from exc

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute_command(*args, **kwargs)
        except (RedisClusterException, AttributeError) as exc:
            raise _unavailable(exc) from exc

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        if transaction or shard_hint:  # redis-py's own refusal
            return super().pipeline(transaction, shard_hint)
        return SteadyPipeline(self)  # type: ignore[abstract]


class SteadyPipeline(ClusterPipeline):
    """A cluster pipeline whose outages are RedisErrors, as the client's commands."""

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        try:
            return await super().execute(raise_on_error, allow_redirections)
        except (RedisClusterException, AttributeError) as exc:
            raise _unavailable(exc) from exc


def _unavailable(exc: Exception) -> Exception:
    """A ClusterUnavailable for an outage, else `exc` itself.

    Besides redis-py's outage messages: an AttributeError on None raised inside redis-py's
    own connection code is the race of a connection closed by a failing command while
    another was still connecting on it (`'NoneType' object has no attribute 'writelines'`
    in `on_connect`, tests/cluster/test_failover.py under load): an outage, not a bug of
    ours. An AttributeError raised anywhere else stays what it is."""
    text = str(exc)
    if isinstance(exc, AttributeError):
        return ClusterUnavailable(text) if _in_redis_connection(exc) else exc
    return ClusterUnavailable(text) if any(o in text for o in _OUTAGES) else exc


def _in_redis_connection(exc: AttributeError) -> bool:
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    module = last.tb_frame.f_globals.get("__name__", "") if last is not None else ""
    return "'NoneType' object" in str(exc) and module.startswith("redis.")


# redis-py 5's pool size: a pool grows with the concurrency asking it. redis-py 8 defaults to
# 100 connections per pool (per node on a cluster) and then raises MaxConnectionsError at once
# (tests/fanout/test_worker_crash.py's 1,000-timeline gather did); decision 0090.
POOL_MAX_CONNECTIONS = 2**31
# RESP2, as redis-py 5 spoke: redis-py 8 defaults to RESP3 (a HELLO round trip more per new
# connection, and other reply shapes: doubles, maps, pushes) which the callers were not written
# for; tests/fanout/test_worker_crash.py's 1,000 connections at once timed out connecting.
PROTOCOL = 2


class RedisRoleError(ValueError):
    """A role's URL it cannot serve (a cluster for the queue role)."""


@dataclass(frozen=True)
class RedisRoles:
    """The client of each Redis role; two roles on one URL hold the same client.

    - timelines: `tl:`, `posts:`, the control plane's `fcw:`, `fcn:`, `fcc:`, `fcr:` keys;
    - sessions: `fs:`, `fsi:`, `imp:`, `act:`, `frr:`, the learned persisted queries `apq:`;
    - queue: ARQ (`arq:*`) and job bookkeeping (`fp:`, `fo:`, `ej:`, `rcn:`, `dl:`, `jf:`,
      `qf:`), always a plain server (or the master its Sentinels name: decision 0091);
    - pubsub: the hub's channels and the live counts (`fu:`, `fur:`, `fuc:`, online), whose
      scripts publish the count they change (decision 0041);
    - limits: `rl:`, `pg:`, `tv:`, `tr:`, `ws:`.
    """

    timelines: AnyRedis
    sessions: AnyRedis
    queue: Redis
    pubsub: AnyRedis
    limits: AnyRedis

    @classmethod
    def single(cls, client: Redis) -> RedisRoles:
        """Every role on one plain client (tests, tools, one REDIS_URL)."""
        return cls(client, client, client, client, client)

    def clients(self) -> list[AnyRedis]:
        """Each distinct client once, in role order."""
        seen: dict[int, AnyRedis] = {}
        for role in REDIS_ROLES:
            client = self.get(role)
            seen.setdefault(id(client), client)
        return list(seen.values())

    def get(self, role: RedisRole) -> AnyRedis:
        return cast(AnyRedis, getattr(self, role))

    async def aclose(self) -> None:
        """Close every client; a close that times out or meets a dead server is logged, not
        raised (redis-py 8 waits for each socket's close, up to its timeout: a loaded machine
        may miss it, and the connection is dropped either way)."""
        for client in self.clients():
            try:
                await client.aclose()
            except (RedisError, OSError) as exc:
                log.warning("a Redis client did not close cleanly: %s", exc)


def make_roles(settings: Settings) -> RedisRoles:
    """One client per distinct role URL. Raises RedisRoleError for a cluster queue URL (the
    settings refuse it too; this also covers settings copied past their validation)."""
    queue_url = settings.redis_role_url("queue")
    if is_cluster_url(queue_url):
        raise RedisRoleError(
            "REDIS_QUEUE_URL must name a plain Redis (ARQ's pipelines touch keys in several "
            f"hash slots), not the cluster {_redact(queue_url)}"
        )
    by_url: dict[str, AnyRedis] = {}
    for role in REDIS_ROLES:
        url = settings.redis_role_url(role)
        if url not in by_url:
            by_url[url] = make_client(settings, url)
    client = {role: by_url[settings.redis_role_url(role)] for role in REDIS_ROLES}
    queue = client["queue"]
    assert isinstance(queue, Redis)  # refused above otherwise
    return RedisRoles(
        timelines=client["timelines"],
        sessions=client["sessions"],
        queue=queue,
        pubsub=client["pubsub"],
        limits=client["limits"],
    )


def make_client(settings: Settings, url: str) -> AnyRedis:
    """A plain client, a cluster client for a `redis+cluster://` URL, or the master of a
    `redis+sentinel://` URL."""
    if is_cluster_url(url):
        return make_cluster(settings, url)
    if is_sentinel_url(url):
        return make_sentinel_master(settings, parse_sentinel_url(url))
    return _make_plain(settings, url)


def sentinels(settings: Settings, target: SentinelTarget) -> Sentinel:
    """The Sentinels of `target`, asked with the same timeouts as any command (a dead
    Sentinel is skipped for the next one within REDIS_CONNECT_TIMEOUT_SECONDS)."""
    return Sentinel(
        list(target.sentinels),
        sentinel_kwargs={
            "socket_timeout": settings.redis_socket_timeout_seconds,
            "socket_connect_timeout": settings.redis_connect_timeout_seconds,
        },
    )


def master_kwargs(settings: Settings, target: SentinelTarget) -> dict[str, Any]:
    """What a connection to the named master carries (all but the read timeout)."""
    return {
        "db": target.db,
        "username": target.username,
        "password": target.password,
        "ssl": target.ssl,
        "decode_responses": False,
        "max_connections": POOL_MAX_CONNECTIONS,
        "protocol": PROTOCOL,
        "health_check_interval": 30,
        "socket_connect_timeout": settings.redis_connect_timeout_seconds,
        "socket_keepalive": True,
    }


def make_sentinel_master(
    settings: Settings,
    target: SentinelTarget,
    redis_class: type[Redis] = TimedRedis,
    **extra: Any,
) -> Redis:
    """A client of the master the Sentinels name. A connection asks them for the master's
    address when it connects; one cut by the master's death fails its command with a
    ConnectionError (callers degrade or retry, as on a plain server) and the next connects
    to whichever master the Sentinels name by then. A connection still open to a demoted
    master gets READONLY and reconnects (redis-py's SentinelManagedConnection)."""
    sentinel = sentinels(settings, target)
    common = master_kwargs(settings, target)
    redis = sentinel.master_for(
        target.master,
        redis_class=redis_class,
        socket_timeout=settings.redis_socket_timeout_seconds,
        **common,
        **extra,
    )
    if isinstance(redis, TimedRedis):  # pub/sub without the read timeout, as _make_plain
        redis.listen_pool = SentinelConnectionPool(  # type: ignore[no-untyped-call]
            target.master, sentinel, **common
        )
    return cast(Redis, redis)


def plain_cluster_url(url: str) -> str:
    """`redis+cluster://h:p` as the `redis://h:p` redis-py's cluster client parses."""
    for scheme in CLUSTER_SCHEMES:
        if url.lower().startswith(scheme):
            return scheme.replace("+cluster", "") + url[len(scheme) :]
    return url


def make_cluster(settings: Settings, url: str) -> RedisCluster:
    """A cluster client with the same timeouts as a plain one; redis-py follows MOVED/ASK and
    rediscovers the slots after a failover."""
    plain = plain_cluster_url(url)
    return Cluster.from_url(
        plain,
        decode_responses=False,
        socket_timeout=settings.redis_socket_timeout_seconds,
        socket_connect_timeout=settings.redis_connect_timeout_seconds,
        socket_keepalive=True,
        health_check_interval=30,
        max_connections=POOL_MAX_CONNECTIONS,
        protocol=PROTOCOL,
    )


def _make_plain(settings: Settings, url: str) -> Redis:
    common: dict[str, Any] = {
        "decode_responses": False,
        "max_connections": POOL_MAX_CONNECTIONS,
        "protocol": PROTOCOL,
        "health_check_interval": 30,
        "socket_connect_timeout": settings.redis_connect_timeout_seconds,
        "socket_keepalive": True,
    }
    redis = TimedRedis.from_url(url, socket_timeout=settings.redis_socket_timeout_seconds, **common)
    assert isinstance(redis, TimedRedis)
    redis.listen_pool = ConnectionPool.from_url(url, **common)
    return redis


def _redact(url: str) -> str:
    """The URL without its password (error messages end up in logs)."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.split("@", 1)[1]
    return scheme + sep + rest


# -- the queue's failover fence (decision 0091) ---------------------------------------------

# Written before a WAIT: WAIT counts the replicas holding everything up to the calling
# connection's last write, and the jobs were enqueued on other pooled connections; one write
# here carries the offset past all of them (every write the master took before it).
FENCE_KEY = "qf:fence"
FENCE_TTL_MS = 60_000  # the key is only a write; it need not outlive a minute


class QueueNotReplicated(RedisError):
    """Jobs enqueued on the queue's master are not known to be on a replica (fewer acks
    within the wait, or the master changed meanwhile): whoever enqueued them must not yet
    count them as safe, and enqueues them again (ARQ drops the copies it holds)."""


@dataclass(frozen=True)
class QueueEpoch:
    """Which master the queue was on (its replication id, new at every promotion or
    restart) and how many replicas a confirmation waits for."""

    master_id: str
    replicas: int


class QueueFence:
    """Says when jobs enqueued on the queue's master would survive its failover.

    Redis replicates asynchronously: a job the master took may die with it. `begin()` before
    enqueueing notes the master; `confirm()` after it writes FENCE_KEY and WAITs until
    `replicas` replicas (at most as many as are connected) hold everything up to there, and
    checks the master is still the one `begin()` saw (a client that reconnected to the
    promoted replica mid-way may have left earlier jobs on the dead master)."""

    def __init__(self, redis: AnyRedis, replicas: int, timeout_ms: int) -> None:
        self.redis = redis
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self.short = False  # fewer replicas connected than wanted, last we looked (logged)

    async def master_id(self) -> str:
        """The queue's master's replication id; QueueNotReplicated when it is a replica."""
        return _master_id(await self.redis.info("replication"))

    async def begin(self) -> QueueEpoch:
        info = await self.redis.info("replication")
        connected = int(info.get("connected_slaves", 0))
        if (connected < self.replicas) != self.short:
            self.short = connected < self.replicas
            if self.short:
                log.warning(
                    "the queue's master has %d of the %d replicas REDIS_QUEUE_WAIT_REPLICAS "
                    "asks for: jobs are confirmed on %d until one (re)joins",
                    connected,
                    self.replicas,
                    connected,
                )
            else:
                log.info("the queue's master has its %d replicas again", self.replicas)
        return QueueEpoch(_master_id(info), min(self.replicas, connected))

    async def confirm(self, epoch: QueueEpoch) -> None:
        """Returns once the jobs enqueued since `begin()` are on `epoch.replicas` replicas;
        raises QueueNotReplicated otherwise."""
        async with self.redis.pipeline(transaction=False) as pipe:
            if epoch.replicas:
                pipe.set(FENCE_KEY, epoch.master_id, px=FENCE_TTL_MS)
                pipe.wait(epoch.replicas, self.timeout_ms)
            pipe.info("replication")
            replies = await pipe.execute()
        if _master_id(replies[-1]) != epoch.master_id:
            raise QueueNotReplicated("the queue's master changed while jobs were enqueued")
        if epoch.replicas and int(replies[1]) < epoch.replicas:
            raise QueueNotReplicated(
                f"{replies[1]} of {epoch.replicas} queue replicas acknowledged within "
                f"{self.timeout_ms} ms"
            )


def _master_id(info: dict[str, Any]) -> str:
    if info.get("role") != "master":
        raise QueueNotReplicated(f"the queue's server is a {info.get('role')}, not a master")
    return str(info.get("master_replid", ""))
