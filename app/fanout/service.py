"""The fan-out service: the write path's one face to the workers, the composition root and
the feed, built of one part per concept and free of ARQ, so tests and benchmarks call it
directly:

- `app.fanout.split.Splitter`: a post's fan-out planned and its pages queued or written;
- `app.fanout.write.BatchWriter`: a FanoutBatch's timeline write, counts and durability;
- `app.fanout.graph_jobs.GraphJobs`: backfill, cleanup, rebuild, post-changed, withdraw;
- `app.fanout.review.ModeReview`: the control plane's periodic pass.

Every operation is idempotent: replays and retries change nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.replica import ReplicaRouter
from app.fanout.graph_jobs import GraphJobs
from app.fanout.lanes import Enqueue
from app.fanout.modes import ModeDecision
from app.fanout.notifier import FanoutNotifier
from app.fanout.review import ModeReview
from app.fanout.split import KeptPages, SplitResult, Splitter
from app.fanout.write import BatchWriter
from app.redis_client import RedisRoles
from app.timelines.store import TimelineStore
from app.timelines.tails import Tail


@dataclass
class FanoutService:
    """The parts, built from what the composition root hands down; each method is one
    part's (see there)."""

    sessions: async_sessionmaker[AsyncSession]
    store: TimelineStore
    settings: Settings
    notifier: FanoutNotifier | None = None
    # Follower paging on a replica that keeps up (decision 0043): `replica_sessions` on its
    # engine, `replica` saying whether it keeps up.
    replica: ReplicaRouter | None = None
    replica_sessions: async_sessionmaker[AsyncSession] | None = None
    # Redis by role (decision 0041): the control plane's keys on the timelines role, lane
    # lag on the queue's, the measured read rate on the sessions'. None: all on the store's.
    roles: RedisRoles | None = None
    writer: BatchWriter = field(init=False)
    splitter: Splitter = field(init=False)
    review: ModeReview = field(init=False)
    graph: GraphJobs = field(init=False)

    def __post_init__(self) -> None:
        if self.roles is None:
            redis = self.store.redis
            assert isinstance(redis, Redis), "a cluster store needs its roles handed down"
            self.roles = RedisRoles.single(redis)
        common = (self.sessions, self.store, self.settings)
        self.writer = BatchWriter(*common, notifier=self.notifier)
        self.splitter = Splitter(
            *common,
            writer=self.writer,
            roles=self.roles,
            notifier=self.notifier,
            replica=self.replica,
            replica_sessions=self.replica_sessions,
        )
        self.review = ModeReview(self.sessions, self.settings, self.roles, self.splitter)
        self.graph = GraphJobs(*common, notifier=self.notifier)

    # -- the split (app.fanout.split) ---------------------------------------------------

    async def split_post(
        self,
        post_id: int,
        enqueue: Enqueue,
        job_prefix: str | None = None,
        kept: KeptPages | None = None,
        *,
        widening: int | None = None,
    ) -> SplitResult | None:
        return await self.splitter.split_post(post_id, enqueue, job_prefix, kept, widening=widening)

    async def enqueue_pages(
        self,
        author_id: int,
        entries: Sequence[Sequence[int]],
        lane: str,
        job_prefix: str,
        after: int,
        enqueue: Enqueue,
        kept: KeptPages | None = None,
        *,
        keep_all: bool = False,
    ) -> tuple[int, int]:
        return await self.splitter.enqueue_pages(
            author_id, entries, lane, job_prefix, after, enqueue, kept, keep_all=keep_all
        )

    def lane_for(self, follower_count: int) -> str:
        return self.splitter.lane_for(follower_count)

    # -- the batch write (app.fanout.write) ---------------------------------------------

    async def deliver(
        self,
        author_id: int,
        entries: Sequence[Sequence[int]],
        user_ids: Sequence[int],
        tail: Tail | None = None,
    ) -> int:
        return await self.writer.deliver(author_id, entries, user_ids, tail)

    # -- the control plane's pass (app.fanout.review) -----------------------------------

    async def review_mode(
        self, author_id: int, enqueue: Enqueue
    ) -> tuple[bool, ModeDecision | None]:
        return await self.review.review_mode(author_id, enqueue)

    async def review_pass(self, enqueue: Enqueue, limit: int, interval_seconds: float) -> int:
        return await self.review.review_pass(enqueue, limit, interval_seconds)

    # -- the graph jobs (app.fanout.graph_jobs) -----------------------------------------

    async def backfill_follow(self, follower_id: int, followee_id: int) -> int:
        return await self.graph.backfill_follow(follower_id, followee_id)

    async def cleanup_author(self, user_id: int, author_id: int) -> int:
        return await self.graph.cleanup_author(user_id, author_id)

    async def rebuild_timeline(self, user_id: int) -> int:
        return await self.graph.rebuild_timeline(user_id)

    async def post_changed(self, post_id: int) -> None:
        await self.graph.post_changed(post_id)

    async def withdraw_from_counts(self, author_id: int, post_id: int, *, final: bool) -> int:
        return await self.graph.withdraw_from_counts(author_id, post_id, final=final)


__all__ = ["FanoutService", "SplitResult"]
