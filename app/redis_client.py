"""Redis connections: one pool per process, decoded responses off (ids are bytes on the wire).

Every command and connect has a timeout (REDIS_SOCKET_TIMEOUT_SECONDS,
REDIS_CONNECT_TIMEOUT_SECONDS): a hung or unreachable Redis fails a call in seconds, with a
RedisError the callers already degrade on, instead of hanging the request. Pub/sub is the one
exception: a subscriber's read waits for the next message by design, so `pubsub()` draws
from a second pool without the read timeout (keep-alive and health checks still find a dead
server).
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.client import PubSub

from app.config import Settings


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


def make_redis(settings: Settings) -> Redis:
    common: dict[str, Any] = {
        "decode_responses": False,
        "health_check_interval": 30,
        "socket_connect_timeout": settings.redis_connect_timeout_seconds,
        "socket_keepalive": True,
    }
    redis = TimedRedis.from_url(
        settings.redis_url, socket_timeout=settings.redis_socket_timeout_seconds, **common
    )
    redis.listen_pool = ConnectionPool.from_url(settings.redis_url, **common)
    return redis
