"""Process-wide resources shared by the API, workers and benchmarks."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings, get_settings
from app.db.engine import make_engine, make_sessionmaker
from app.fanout.service import FanoutService
from app.redis_client import make_redis
from app.timelines.store import TimelineStore


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    redis: Redis
    timelines: TimelineStore
    fanout: FanoutService

    async def close(self) -> None:
        await self.redis.aclose()
        await self.engine.dispose()


def create_state(settings: Settings | None = None, pool_size: int = 10) -> AppState:
    settings = settings or get_settings()
    engine = make_engine(settings, pool_size=pool_size)
    sessions = make_sessionmaker(engine)
    redis = make_redis(settings)
    timelines = TimelineStore(redis, settings.timeline_max, settings.author_posts_max)
    return AppState(
        settings=settings,
        engine=engine,
        sessions=sessions,
        redis=redis,
        timelines=timelines,
        fanout=FanoutService(sessions, timelines, settings),
    )
