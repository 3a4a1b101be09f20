"""The asyncpg connection under one of the engine's pooled connections: COPY
(`copy_records_to_table`) and server-side cursors are the driver's, not SQLAlchemy's.

No SQLAlchemy transaction is begun on it, so statements autocommit and the pool's reset
on return (a rollback) has nothing to do; a caller that wants a transaction opens the
driver's own (`conn.transaction()`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine


@asynccontextmanager
async def driver(engine: AsyncEngine) -> AsyncIterator[asyncpg.Connection[Any]]:
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        yield raw.driver_connection
