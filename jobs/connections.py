"""ARQ connections: where the workers, the relay, the dead-letter CLI and the tests reach
ARQ's Redis. A module of its own, below every other part of jobs/, so that a command line
(`python -m jobs.dead_letters`) does not import the worker that imports it back (the
import circle of issue 20).

The queue role is a plain server or, with a `redis+sentinel://` URL, the master its
Sentinels name (decision 0091). `redis_settings` describes it to ARQ (`RedisSettings(
sentinel=True)` for `arq --check` and anyone calling `create_pool`), but the processes
connect through the same redis-py client as the API's roles
(app.redis_client.make_sentinel_master): ARQ's own Sentinel path sets no timeouts and no
retries, and an ARQ worker's loop ends on the first connection error (python-arq/arq#386,
#435), which at a failover costs a restart of every worker (measured: fan-out resumed 12-14 s
after the kill, most of it the workers' start-up). A worker's connection retries connection
errors instead, with backoff, for longer than a failover takes, and so rides it out."""

from __future__ import annotations

from dataclasses import replace

from arq.connections import ArqRedis, RedisSettings, create_pool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.config import Settings, is_sentinel_url, parse_sentinel_url
from app.redis_client import POOL_MAX_CONNECTIONS, QueueFence, make_sentinel_master

# A worker starting while the Sentinels still name a dead master (its supervisor restarts
# it at once) tries this many times, a second apart: longer than a failover takes
# (down-after-milliseconds + election, docs/DEPLOYMENT.md "Redis roles").
SENTINEL_CONNECT_TRIES = 30
# A worker's command that meets a dead master is tried again after 50 ms, 100 ms, ... 1 s
# (s), this many times (~40 s in all): a failover (DEPLOYMENT.md: down-after-milliseconds 5 s
# plus the election) is ridden out; a longer outage then ends the worker, as before.
WORKER_RETRY_BASE_SECONDS = 0.05
WORKER_RETRY_CAP_SECONDS = 1.0
WORKER_RETRIES = 45


def redis_settings(settings: Settings) -> RedisSettings:
    """ARQ's server: REDIS_QUEUE_URL (else REDIS_URL), a plain Redis (never a cluster) or
    the master of a `redis+sentinel://` URL."""
    url = settings.redis_role_url("queue")
    if not is_sentinel_url(url):
        # redis-py 8's pools stop at 100 connections by default (decision 0090).
        return replace(RedisSettings.from_dsn(url), max_connections=POOL_MAX_CONNECTIONS)
    target = parse_sentinel_url(url)
    return RedisSettings(
        host=list(target.sentinels),
        sentinel=True,
        sentinel_master=target.master,
        database=target.db,
        username=target.username,
        password=target.password,
        ssl=target.ssl,
        conn_retries=SENTINEL_CONNECT_TRIES,
        max_connections=POOL_MAX_CONNECTIONS,
    )


def expires_ms(settings: Settings) -> int:
    """How long ARQ keeps a queued job before dropping it unrun (its `expires`)."""
    return settings.job_expires_seconds * 1000


async def arq_pool(settings: Settings) -> ArqRedis:
    """An ARQ connection whose jobs expire after JOB_EXPIRES_SECONDS (the relay's, the CLI's;
    the workers' own connection gets it from `expires_extra_ms`, jobs.worker)."""
    url = settings.redis_role_url("queue")
    if not is_sentinel_url(url):
        return await create_pool(redis_settings(settings), expires_extra_ms=expires_ms(settings))
    pool = make_sentinel_master(settings, parse_sentinel_url(url), redis_class=ArqRedis)
    assert isinstance(pool, ArqRedis)
    pool.expires_extra_ms = expires_ms(settings)
    return pool


def queue_fence(settings: Settings, redis: ArqRedis) -> QueueFence:
    """When jobs enqueued on `redis` would survive a failover of the queue's master. The
    WAIT ends before the socket times out (an unset REDIS_QUEUE_WAIT_MS gives way to a short
    REDIS_SOCKET_TIMEOUT_SECONDS: half of it; a set one is checked at start-up)."""
    wait_ms = settings.redis_queue_wait_ms
    if "redis_queue_wait_ms" not in settings.model_fields_set:
        wait_ms = min(wait_ms, int(settings.redis_socket_timeout_seconds * 500))
    return QueueFence(redis, settings.redis_queue_wait_replicas, max(1, wait_ms))


def worker_pool(settings: Settings, queue_name: str) -> ArqRedis | None:
    """A worker's ARQ connection to a `redis+sentinel://` queue, whose commands retry through
    a failover; None for a plain server (ARQ connects itself from `redis_settings`). Built
    unconnected (jobs.worker's settings are read at import): it connects on first use."""
    url = settings.redis_role_url("queue")
    if not is_sentinel_url(url):
        return None
    retry = Retry(
        ExponentialBackoff(cap=WORKER_RETRY_CAP_SECONDS, base=WORKER_RETRY_BASE_SECONDS),
        WORKER_RETRIES,
    )
    pool = make_sentinel_master(
        settings,
        parse_sentinel_url(url),
        redis_class=ArqRedis,
        retry=retry,
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )
    assert isinstance(pool, ArqRedis)
    pool.expires_extra_ms = expires_ms(settings)
    pool.default_queue_name = queue_name
    return pool
