"""Redis connections: one pool per process, decoded responses off (ids are bytes on the wire)."""

from __future__ import annotations

from redis.asyncio import Redis

from app.config import Settings


def make_redis(settings: Settings) -> Redis:
    return Redis.from_url(settings.redis_url, decode_responses=False, health_check_interval=30)
