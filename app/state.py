"""Process-wide resources shared by the API, workers and benchmarks."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings, get_settings
from app.db.engine import make_engine, make_sessionmaker
from app.fanout.lag import LagProbe
from app.fanout.service import FanoutService
from app.feed.bodies import BodyCache
from app.feed.service import FeedService
from app.feed.sessions import FeedSessionStore
from app.realtime.notifier import RedisNotifier
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
    feed: FeedService

    async def close(self) -> None:
        await self.redis.aclose()
        await self.engine.dispose()


def create_state(settings: Settings | None = None, pool_size: int = 10) -> AppState:
    settings = settings or get_settings()
    engine = make_engine(settings, pool_size=pool_size)
    sessions = make_sessionmaker(engine)
    redis = make_redis(settings)
    timelines = TimelineStore(redis, settings.timeline_max, settings.author_posts_max)
    # Workers publish live "new posts" notifications after each timeline write.
    fanout = FanoutService(sessions, timelines, settings, notifier=RedisNotifier(redis))
    feed = FeedService(
        sessions=sessions,
        store=timelines,
        feed_sessions=FeedSessionStore(redis, settings.feed_session_ttl_seconds),
        bodies=BodyCache(redis),
        lag=LagProbe(redis, settings.lag_threshold_seconds),
        settings=settings,
        rebuild=fanout.rebuild_timeline,
    )
    return AppState(
        settings=settings,
        engine=engine,
        sessions=sessions,
        redis=redis,
        timelines=timelines,
        fanout=fanout,
        feed=feed,
    )
