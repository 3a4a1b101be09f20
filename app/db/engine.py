"""One async engine per process; sessions and connections come from here.

PostgreSQL out of reach is `Unavailable` (UNAVAILABLE with retryAfter) for every caller, not a
driver exception that would answer INTERNAL: a checkout that cannot connect (refused, timed
out, "shutting down", too many clients) or times out fails in `_Pool.connect`, a statement
on a connection the server ended fails through the `handle_error` hook, which also throws
the pool's other (equally dead) connections away, and a checkout never hands out a
connection the driver knows is closed. See app.db.errors."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import AsyncAdaptedQueuePool, ConnectionPoolEntry, PoolProxiedConnection

from app.config import Settings
from app.db.errors import unavailable, unreachable
from app.errors import Unavailable


class _Pool(AsyncAdaptedQueuePool):
    """The engine's pool: a checkout that finds PostgreSQL out of reach raises Unavailable."""

    def connect(self) -> PoolProxiedConnection:
        try:
            return super().connect()
        except Unavailable:
            raise
        except Exception as exc:
            if unreachable(exc):
                raise unavailable() from exc
            raise


def _reject_closed(
    dbapi_connection: Any, _record: ConnectionPoolEntry, _proxy: PoolProxiedConnection
) -> None:
    """A pooled connection the driver already knows is closed (the server ended it while it
    sat in the pool) is replaced at checkout instead of failing its first statement: the
    pool invalidates it and connects again. One attribute read, no round trip."""
    driver = getattr(dbapi_connection, "driver_connection", None)
    if driver is not None and driver.is_closed():
        raise sa_exc.DisconnectionError("the server ended this pooled connection")


def _statement_failed(context: ExceptionContext) -> Unavailable | None:
    """A statement's error: Unavailable when the server or the connection is gone (the
    connection is then invalidated, not rolled back), else SQLAlchemy's own error. A
    cancelled statement (CancelledError, also a "disconnect" to SQLAlchemy) stays one."""
    if not isinstance(context.original_exception, Exception):
        return None
    if context.is_disconnect or unreachable(context.original_exception):
        context.is_disconnect = True
        return unavailable()
    return None


def make_engine(settings: Settings, pool_size: int = 10, url: str = "") -> AsyncEngine:
    """The process's engine on DATABASE_URL, or on `url` (the replica's, app.db.replica)."""
    engine = create_async_engine(
        url or settings.asyncpg_dsn,
        poolclass=_Pool,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        # Statement cache is per connection in asyncpg; keep it (our queries are few and fixed).
        # A connect gives up after DATABASE_CONNECT_TIMEOUT_SECONDS (asyncpg waits 60 s).
        connect_args={
            "server_settings": {"application_name": "hybridfeed"},
            "timeout": settings.database_connect_timeout_seconds,
        },
    )
    event.listen(engine.sync_engine, "handle_error", _statement_failed)
    event.listen(engine.sync_engine, "checkout", _reject_closed)
    return engine


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
