"""The composition root: the one place that builds the process's resources and services and
hands each service what it needs of the others (the API, the ARQ workers, tests and
benchmarks all start from `create_state`).

Only the outer layers import this module: app.web, app.api (the request context), jobs/.
No domain module does (the import contract in .importlinter says so): a service gets its
collaborators as constructor arguments, so the arrows between the parts are the ones drawn
in docs/ARCHITECTURE.md, and a part can be built alone in a test.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings, get_settings
from app.db.engine import make_engine, make_sessionmaker
from app.fanout.control import published_costs
from app.fanout.lag import LagProbe, lane_lag_seconds
from app.fanout.service import FanoutService
from app.feed.service import FeedService
from app.feed.sessions import FeedSessionStore
from app.outbox.relay import oldest_unpublished_seconds
from app.passwords import PasswordGate
from app.realtime.counts import reset_new_post_count
from app.realtime.notifier import RedisNotifier
from app.redis_client import make_redis
from app.timelines.store import TimelineStore
from app.users.activity import Activity
from app.users.reads import ReadCounter


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    redis: Redis
    timelines: TimelineStore
    fanout: FanoutService
    feed: FeedService
    activity: Activity
    passwords: PasswordGate

    async def lane_lag(self) -> dict[str, tuple[float, int]]:
        """For /metrics (app.observability.exposition.LiveSources)."""
        return await lane_lag_seconds(self.redis)

    async def outbox_age(self) -> float:
        """For /metrics (app.observability.exposition.LiveSources)."""
        return await oldest_unpublished_seconds(self.engine)

    async def author_costs(self) -> list[tuple[str, float, float]]:
        """For /metrics (app.observability.exposition.LiveSources)."""
        costs = await published_costs(self.redis)
        return [(c.handle, c.write_seconds, c.read_seconds) for c in costs]

    def forget_local(self) -> None:
        """Forget what this process keeps in memory about users and posts: the pulled
        authors' cache, the open feed sessions and their verified windows, the activity
        gate (tests: ids restart with every test's empty tables; in production nothing needs
        it)."""
        self.feed.author_cache.clear()
        self.feed.open_sessions.clear()
        self.feed.context_cache.clear()
        self.feed.verified.clear()
        self.activity.recently.clear()
        self.feed.impressions.clear()

    async def close(self) -> None:
        await self.feed.impressions.close()  # flush what is buffered before Redis goes
        await self.feed.read_counter.close()
        await self.redis.aclose()
        await self.engine.dispose()


def create_state(settings: Settings | None = None, pool_size: int = 10) -> AppState:
    settings = settings or get_settings()
    engine = make_engine(settings, pool_size=pool_size)
    sessions = make_sessionmaker(engine)
    redis = make_redis(settings)
    timelines = TimelineStore(redis, settings.timeline_max, settings.author_posts_max)
    # Workers publish live "new posts" notifications after each timeline write.
    fanout = FanoutService(sessions, timelines, settings, notifier=RedisNotifier(redis, settings))
    # Timeline rebuilds run in the API process that needs them (see app.users.activity).
    activity = Activity(redis, engine, timelines, settings.active_days, fanout.rebuild_timeline)
    feed = FeedService(
        sessions=sessions,
        store=timelines,
        feed_sessions=FeedSessionStore(
            redis, settings.feed_session_ttl_seconds, settings.feed_sessions_per_viewer
        ),
        lag=LagProbe(redis, settings.lag_threshold_seconds),
        settings=settings,
        rebuild=fanout.rebuild_timeline,
        activity=activity,
        reset_new_posts=partial(reset_new_post_count, redis, settings),
        read_counter=ReadCounter(redis),
    )
    return AppState(
        settings=settings,
        engine=engine,
        sessions=sessions,
        redis=redis,
        timelines=timelines,
        fanout=fanout,
        feed=feed,
        activity=activity,
        passwords=PasswordGate(settings.password_hash_concurrency, settings.password_hash_wait_ms),
    )
