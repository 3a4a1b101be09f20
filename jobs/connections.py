"""ARQ connections: where the workers, the relay, the dead-letter CLI and the tests reach
ARQ's Redis. A module of its own, below every other part of jobs/, so that a command line
(`python -m jobs.dead_letters`) does not import the worker that imports it back (the
import circle of issue 20).

The queue role is a plain server or, with a `redis+sentinel://` URL, the master its
Sentinels name (decision 0091). Workers reach it through ARQ's own Sentinel support
(`RedisSettings(sentinel=True)`); the relay and the CLI through the same redis-py client
as the API's roles (app.redis_client.make_sentinel_master), with its timeouts, which ARQ's
Sentinel path does not set."""

from __future__ import annotations

from arq.connections import ArqRedis, RedisSettings, create_pool

from app.config import Settings, is_sentinel_url, parse_sentinel_url
from app.redis_client import QueueFence, make_sentinel_master

# A worker starting while the Sentinels still name a dead master (its supervisor restarts
# it at once) tries this many times, a second apart: longer than a failover takes
# (down-after-milliseconds + election, docs/DEPLOYMENT.md "Redis roles").
SENTINEL_CONNECT_TRIES = 30


def redis_settings(settings: Settings) -> RedisSettings:
    """ARQ's server: REDIS_QUEUE_URL (else REDIS_URL), a plain Redis (never a cluster) or
    the master of a `redis+sentinel://` URL."""
    url = settings.redis_role_url("queue")
    if not is_sentinel_url(url):
        return RedisSettings.from_dsn(url)
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
    """When jobs enqueued on `redis` would survive a failover of the queue's master."""
    return QueueFence(redis, settings.redis_queue_wait_replicas, settings.redis_queue_wait_ms)
