"""ARQ connections: where the workers, the relay, the dead-letter CLI and the tests reach
ARQ's Redis. A module of its own, below every other part of jobs/, so that a command line
(`python -m jobs.dead_letters`) does not import the worker that imports it back (the
import circle of issue 20)."""

from __future__ import annotations

from dataclasses import replace

from arq.connections import ArqRedis, RedisSettings, create_pool

from app.config import Settings
from app.redis_client import POOL_MAX_CONNECTIONS


def redis_settings(settings: Settings) -> RedisSettings:
    """ARQ's server: REDIS_QUEUE_URL (else REDIS_URL), a plain Redis (never a cluster)."""
    found = RedisSettings.from_dsn(settings.redis_role_url("queue"))
    # redis-py 8's pools stop at 100 connections by default (decision 0090).
    return replace(found, max_connections=POOL_MAX_CONNECTIONS)


def expires_ms(settings: Settings) -> int:
    """How long ARQ keeps a queued job before dropping it unrun (its `expires`)."""
    return settings.job_expires_seconds * 1000


async def arq_pool(settings: Settings) -> ArqRedis:
    """An ARQ connection whose jobs expire after JOB_EXPIRES_SECONDS (the relay's, the CLI's;
    the workers' own connection gets it from `expires_extra_ms`, jobs.worker)."""
    return await create_pool(redis_settings(settings), expires_extra_ms=expires_ms(settings))
