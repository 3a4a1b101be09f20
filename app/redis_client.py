"""Redis connections: one client per Redis role and URL per process, decoded responses off
(ids are bytes on the wire).

Roles (`RedisRoles`, decision 0041): timelines, sessions, queue, pubsub, limits, each on its
own URL setting (REDIS_<ROLE>_URL, empty = REDIS_URL). Roles on one URL share one client, so
one REDIS_URL is one pool, as before roles existed. `redis+cluster://` / `rediss+cluster://`
URLs get a RedisCluster (any node is a seed); the queue role refuses one (ARQ needs a plain
server). Built here and handed down by the composition roots (app/state.py, app/web.py,
jobs/worker.py, jobs/relay.py); nothing else opens a connection.

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

from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException

from app.config import CLUSTER_SCHEMES, REDIS_ROLES, RedisRole, Settings, is_cluster_url
from app.redis_scripts import AnyRedis


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
    - queue: ARQ (`arq:*`) and job bookkeeping (`fp:`, `fo:`, `ej:`, `rcn:`, `dl:`, `jf:`),
      always a plain server;
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
        for client in self.clients():
            await client.aclose()


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
    """A plain client, or a cluster client for a `redis+cluster://` URL."""
    if is_cluster_url(url):
        return make_cluster(settings, url)
    return _make_plain(settings, url)


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
