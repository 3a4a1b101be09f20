"""Redis connections: one pool per process, decoded responses off (ids are bytes on the wire).

Every command and connect has a timeout (REDIS_SOCKET_TIMEOUT_SECONDS,
REDIS_CONNECT_TIMEOUT_SECONDS): a hung or unreachable Redis fails a call in seconds, with a
RedisError the callers already degrade on, instead of hanging the request. Pub/sub is the one
exception: a subscriber's read waits for the next message by design, so `pubsub()` draws
from a second pool without the read timeout (keep-alive and health checks still find a dead
server).

Commands are packed by hiredis (`PackedConnection`) where the `hiredis` wheel is installed, as
redis-py's sync client already does: its asyncio client packs in Python, which cost ~2 ms of
worker CPU per 1,000-key fan-out EVALSHA against ~0.3 ms with hiredis (docs/benchmarks.md,
"commands packed by hiredis": one post to 50,000 followers in 454-493 ms against 485-675).
"""

from __future__ import annotations

from typing import Any, cast

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.client import PubSub
from redis.asyncio.connection import Connection
from redis.connection import HiredisRespSerializer
from redis.utils import HIREDIS_AVAILABLE

from app.config import Settings


class PackedConnection(Connection):
    """A TCP connection whose commands redis-py's own hiredis serializer packs."""

    _packer = HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        return cast(list[bytes], self._packer.pack(*args))


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
        **_packed_connections(settings.redis_url),
        "health_check_interval": 30,
        "socket_connect_timeout": settings.redis_connect_timeout_seconds,
        "socket_keepalive": True,
    }
    redis = TimedRedis.from_url(
        settings.redis_url, socket_timeout=settings.redis_socket_timeout_seconds, **common
    )
    redis.listen_pool = ConnectionPool.from_url(settings.redis_url, **common)
    return cast(Redis, redis)


def _packed_connections(url: str) -> dict[str, Any]:
    """PackedConnection for plain TCP URLs when hiredis is there; TLS and unix sockets keep
    redis-py's own connection classes."""
    if HIREDIS_AVAILABLE and url.startswith("redis://"):
        return {"connection_class": PackedConnection}
    return {}
