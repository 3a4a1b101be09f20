"""Alembic environment: async engine on DATABASE_URL."""

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import get_settings
from app.db.models import Base

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)
target_metadata = Base.metadata
# The engagement log's day partitions are made and dropped by a job, not by migrations
# (app.engagement.partitions): the comparison with the models sees the parent table only.
PARTITION_PREFIX = "engagement_events_p"


def _include_name(name: str | None, type_: str, parent_names: object) -> bool:
    return not (type_ == "table" and name is not None and name.startswith(PARTITION_PREFIX))


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection, target_metadata=target_metadata, include_name=_include_name
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(get_settings().asyncpg_dsn)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=get_settings().asyncpg_dsn,
        target_metadata=target_metadata,
        include_name=_include_name,
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
