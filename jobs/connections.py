"""ARQ connections: where the workers, the relay, the dead-letter CLI and the tests reach
ARQ's Redis. A module of its own, below every other part of jobs/, so that a command line
(`python -m jobs.dead_letters`) does not import the worker that imports it back (the
import circle of issue 20)."""

from __future__ import annotations

from arq.connections import ArqRedis, RedisSettings, create_pool

from app.config import Settings
from app.redis_client import POOL_MAX_CONNECTIONS


def redis_settings(settings: Settings) -> RedisSettings:
    """ARQ's server: REDIS_QUEUE_URL (else REDIS_URL), a plain Redis (never a cluster)."""
    found = RedisSettings.from_dsn(settings.redis_role_url("queue"))
    found.max_connections = POOL_MAX_CONNECTIONS  # redis-py 8's default is 100 (decision 0090)
    return found


def expires_ms(settings: Settings) -> int:
    """How long ARQ keeps a queued job before dropping it unrun (its `expires`)."""
    return settings.job_expires_seconds * 1000


async def arq_pool(settings: Settings) -> ArqRedis:
    """An ARQ connection whose jobs expire after JOB_EXPIRES_SECONDS (the relay's, the CLI's;
    the workers' own connection gets it from `expires_extra_ms`, jobs.worker)."""
    return await create_pool(redis_settings(settings), expires_extra_ms=expires_ms(settings))
