"""One async engine per process; sessions and connections come from here."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from app.config import Settings


def make_engine(settings: Settings, pool_size: int = 10) -> AsyncEngine:
    return create_async_engine(
        settings.asyncpg_dsn,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=False,
        # Statement cache is per connection in asyncpg; keep it (our queries are few and fixed).
        connect_args={"server_settings": {"application_name": "hybridfeed"}},
    )


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)
