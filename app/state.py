"""The composition root: the one place that builds the process's resources and services and
hands each service what it needs of the others (the API, the ARQ workers, tests and
benchmarks all start from `create_state`).

Only the outer layers import this module: app.web, app.api (the request context), jobs/.
No domain module does (the import contract in .importlinter says so): a service gets its
collaborators as constructor arguments, so the arrows between the parts are the ones drawn
in docs/ARCHITECTURE.md, and a part can be built alone in a test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import FaultSwitches, Settings, get_faults, get_settings
from app.db.engine import make_engine, make_sessionmaker
from app.db.replica import ReplicaRouter, ReplicaSet, make_replicas
from app.db.watermarks import Watermarks
from app.engagement.features import SourceQuality
from app.engagement.writer import EngagementLog
from app.fanout.control import published_costs
from app.fanout.lag import LagProbe, lane_lag_seconds
from app.fanout.service import FanoutService
from app.feed.service import FeedService
from app.feed.sessions import FeedSessionStore
from app.media import hydrate
from app.media.store import ObjectStore
from app.media.stores import make_store
from app.passwords import CHEAP_HASHER, PasswordGate
from app.posts.regions import set_serving_region
from app.realtime.counts import reset_new_post_count
from app.realtime.notifier import RedisNotifier
from app.redis_client import RedisRoles, make_roles
from app.relay import oldest_unpublished_seconds
from app.timelines.store import TimelineStore
from app.users.activity import Activity
from app.users.reads import ReadCounter


@dataclass
class AppState:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    roles: RedisRoles
    timelines: TimelineStore
    fanout: FanoutService
    feed: FeedService
    activity: Activity
    passwords: PasswordGate
    # The engagement log's writer and its source-quality feature (app.engagement).
    engagement: EngagementLog
    source_quality: SourceQuality
    # Image posts' bytes (MEDIA_STORE: app.media.stores), closed with the state.
    media_store: ObjectStore
    replica: ReplicaRouter | None = None  # the first replica: fan-out's (decision 0043)
    # Every replica (DATABASE_REPLICA_URLS) and the narrowing watermarks that say when one
    # may answer a feed page (decision 0086); None without replicas.
    replicas: ReplicaSet | None = None
    watermarks: Watermarks | None = None
    # Test-only faults (JOB_FAULT_HOOK, FEED_FAULT_*), apart from the settings (decision 0073).
    faults: FaultSwitches = field(default_factory=FaultSwitches.model_construct)

    @property
    def redis(self) -> Redis:
        """The queue role's client: a plain server, never a cluster (or the master its
        Sentinels name, decision 0091), and with one REDIS_URL the one
        client of every role (tests flush it; tools use it). Services take their own role's
        client from `roles`."""
        return self.roles.queue

    async def lane_lag(self) -> dict[str, tuple[float, int]]:
        """For /metrics (app.observability.exposition.LiveSources)."""
        return await lane_lag_seconds(self.roles.queue)

    async def outbox_age(self) -> float:
        """For /metrics (app.observability.exposition.LiveSources)."""
        return await oldest_unpublished_seconds(self.engine)

    async def author_costs(self) -> list[tuple[str, float, float]]:
        """For /metrics (app.observability.exposition.LiveSources)."""
        costs = await published_costs(self.roles.timelines)
        return [(c.handle, c.write_seconds, c.read_seconds) for c in costs]

    def forget_local(self) -> None:
        """Forget what this process keeps in memory about users and posts: the pulled
        authors' cache, the open feed sessions and their verified windows, the activity
        gate (tests: ids restart with every test's empty tables; in production nothing needs
        it)."""
        self.feed.author_cache.clear()
        self.feed.open_sessions.clear()
        self.feed.context_cache.clear()
        self.feed.recommendations.cache.clear()
        self.feed.verified.clear()
        self.activity.recently.clear()
        self.feed.impressions.clear()
        self.engagement.clear()
        self.source_quality.clear()
        hydrate.forget_local()

    async def close(self) -> None:
        await self.feed.impressions.close()  # flush what is buffered before Redis goes
        await self.feed.read_counter.close()
        await self.engagement.close()  # flush the log's buffer before the engine goes
        await self.media_store.close()
        await self.roles.aclose()
        await self.engine.dispose()
        if self.replicas is not None:
            await self.replicas.close()


def create_state(
    settings: Settings | None = None, pool_size: int = 10, roles: RedisRoles | None = None
) -> AppState:
    """`roles`: Redis clients to use instead of building them from the settings (a root
    that already holds them); closed with the state either way."""
    settings = settings or get_settings()
    set_serving_region(settings.region)  # who no request's region judges (decision 0088)
    faults = get_faults()  # test-only; Settings refuses them with PROFILE=production
    engine = make_engine(settings, pool_size=pool_size)
    sessions = make_sessionmaker(engine)
    roles = roles or make_roles(settings)  # one client per distinct URL (decision 0041)
    replicas = make_replicas(settings, pool_size=pool_size)
    replica = replicas.routers[0] if replicas is not None else None
    # Recorded whenever a replica is configured, read only with DATABASE_REPLICA_FEED_PAGES:
    # a rollout records marks everywhere before any page trusts them (decision 0086).
    watermarks = (
        Watermarks(roles.sessions, engine, settings.database_replica_watermark_ttl_seconds)
        if replicas is not None
        else None
    )
    replica_sessions = make_sessionmaker(replica.engine) if replica is not None else None
    timelines = TimelineStore(roles.timelines, settings.timeline_max, settings.author_posts_max)
    # Workers publish live "new posts" notifications after each timeline write.
    notifier = RedisNotifier(roles.pubsub, settings)
    fanout = FanoutService(
        sessions,
        timelines,
        settings,
        notifier=notifier,
        roles=roles,
        replica=replica,
        replica_sessions=replica_sessions,
    )
    # Impressions and engagement, COPYed in batches off the request path (app.engagement).
    engagement = EngagementLog(engine, settings.engagement_buffer_max)
    # Each author's engagement rate, a feature of the ranking model (decision 0078).
    source_quality = SourceQuality(engine, settings.engagement_quality_refresh_seconds)
    # Timeline rebuilds run in the API process that needs them (see app.users.activity).
    activity = Activity(
        roles.sessions, engine, timelines, settings.active_days, fanout.rebuild_timeline
    )
    feed = FeedService(
        sessions=sessions,
        store=timelines,
        feed_sessions=FeedSessionStore(
            roles.sessions, settings.feed_session_ttl_seconds, settings.feed_sessions_per_viewer
        ),
        lag=LagProbe(roles.queue, settings.lag_threshold_seconds),
        settings=settings,
        rebuild=fanout.rebuild_timeline,
        activity=activity,
        reset_new_posts=partial(reset_new_post_count, roles.pubsub, settings),
        read_counter=ReadCounter(roles.sessions),
        replicas=replicas if settings.database_replica_feed_pages else None,
        marks=watermarks,
        faults=faults,
        engagement=engagement,
        quality=source_quality,
    )
    # The test suite's cheap Argon2 (a test switch); production always hashes for real.
    cheap_hashes = faults.password_hash_cheap and settings.profile != "production"
    return AppState(
        settings=settings,
        engine=engine,
        sessions=sessions,
        roles=roles,
        timelines=timelines,
        fanout=fanout,
        feed=feed,
        activity=activity,
        passwords=PasswordGate(
            settings.password_hash_concurrency,
            settings.password_hash_wait_ms,
            CHEAP_HASHER if cheap_hashes else None,
        ),
        engagement=engagement,
        source_quality=source_quality,
        media_store=make_store(settings),
        replica=replica,
        replicas=replicas,
        watermarks=watermarks,
        faults=faults,
    )
