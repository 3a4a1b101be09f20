"""The split: a post's fan-out planned from its author's mode and active followers
(`split_post`), pages of followers turned into FanoutBatch jobs or written at once
(`enqueue_pages`, decisions 0054, 0060, 0064), continuations past SPLIT_PAGES pages, and the
catch-up of a switch back to PUSH (decision 0027). Free of ARQ: jobs are queued through an
`Enqueue` and a planning job's own accounting is a `KeptPages`, both handed in by the job."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.models import FANOUT_PULL, FANOUT_PUSH, Post, PostWidening, Visibility
from app.db.replica import REPLICA_READS, ReplicaRouter
from app.fanout import constants, lanes
from app.fanout.control import catchup_done, pending_catchup, record_post
from app.fanout.lanes import Enqueue
from app.fanout.modes import ModeDecision, resolve_mode
from app.fanout.notifier import FanoutNotifier
from app.fanout.queries import active_followers, active_since
from app.fanout.write import BatchWriter
from app.posts.ids import created_ms
from app.redis_client import RedisRoles
from app.timelines.store import TimelineStore


class _NotReplayed(Exception):
    """The replica has not replayed the post being split yet: page followers on the primary."""


def post_job_prefix(post_id: int) -> str:
    """The prefix of the job ids of a post's first fan-out (its batches and continuations);
    the reconciler's re-runs pass their own prefix."""
    return f"fb:{post_id}"


def batch_job_id(job_prefix: str, first_follower: int) -> str:
    """A FanoutBatch job's id: deterministic, so a replayed split re-enqueues the same batch."""
    return f"{job_prefix}:{first_follower}"


class KeptPages(Protocol):
    """A planning job's account of the pages of its own post it writes itself instead of
    queueing them (decisions 0060, 0064; `jobs.tasks` counts them in the job's tracking
    step). Why a planning job writes pages: one worker builds a page's script call in ~1 ms
    of CPU while Redis takes ~1.3-2.8 ms to run it, so one process keeps Redis busy from the
    first page on, and no page waits for a queue hop (a worker polls, then claims a job in
    four round trips, each behind the EVALSHAs in flight: 60-180 ms for the last groups
    under load). A larger author's pages still go mostly to its lane's workers; a post of
    1 + JOB_PAGES pages or fewer (every ordinary post) keeps none."""

    async def written(self, user_ids: list[int], lane: str) -> None:
        """This page of followers was written (raises as the write does: the job fails)."""


@dataclass(frozen=True)
class _Groups:
    """A planning job's follower pages as queued: one list per FanoutBatch job, and whether
    followers remain past them (a continuation)."""

    groups: list[list[int]]
    more: bool


@dataclass(frozen=True)
class SplitResult:
    mode: int
    batches: int
    followers: int
    # PULL and not PRIVATE: indexed under its author, so every follower reads it from now on.
    pulled: bool = False


@dataclass
class Splitter:
    """Plans each post's fan-out and writes or queues its pages."""

    sessions: async_sessionmaker[AsyncSession]
    store: TimelineStore
    settings: Settings
    writer: BatchWriter
    roles: RedisRoles
    notifier: FanoutNotifier | None = None
    # Follower paging on a replica that keeps up (decision 0043): `replica_sessions` on its
    # engine, `replica` saying whether it keeps up.
    replica: ReplicaRouter | None = None
    replica_sessions: async_sessionmaker[AsyncSession] | None = None

    async def split_post(
        self,
        post_id: int,
        enqueue: Enqueue,
        job_prefix: str | None = None,
        kept: KeptPages | None = None,
        *,
        widening: int | None = None,
    ) -> SplitResult | None:
        """PostCreated: index the post under its author, then page active followers into
        FanoutBatch jobs (push) or stop there (pull: one write whatever the follower count).
        `job_prefix`: the batches' job ids (a re-run by the reconciler gets fresh ones);
        `kept`: the planning job's account of the pages it writes itself (`enqueue_pages`),
        when the author has more than 1 + JOB_PAGES pages of followers. `widening`: the version a
        widening (PRIVATE -> FOLLOWERS/PUBLIC) gave the post (decision 0067): counted as a
        post of its own in the posting-rate window, and nothing more when a later widening
        overtook it (that one's split fans the post out)."""
        async with self.sessions.begin() as session:
            post = await session.get(Post, post_id)
            if post is None or post.deleted_at is not None:
                return None
            timelines = self.roles.timelines
            if widening is None:
                # Counted once per post (keyed by its id: a replayed split adds nothing).
                await record_post(timelines, post.author_id, created_ms(post.id), post.id)
            else:
                # A widening costs the cost model what a post does: counted at its own time,
                # once per (post, version).
                now_ms = int(time.time() * 1000)
                await record_post(timelines, post.author_id, now_ms, f"{post.id}:{widening}")
                newest = await session.scalar(
                    select(func.max(PostWidening.version)).where(PostWidening.post_id == post.id)
                )
                if newest is not None and newest > widening:
                    return None
            decision = await resolve_mode(session, post.author_id, self.settings, redis=self.roles)
        score = created_ms(post.id)
        await self.store.push_author_post(post.author_id, post.id, score)
        await self.catch_up(post.author_id, decision, enqueue, post.id)
        if post.visibility == Visibility.PRIVATE:
            return SplitResult(decision.mode, 0, 0)
        if decision.mode == FANOUT_PULL:
            if self.notifier is not None:
                await self.notifier.author_posted(post.author_id, post.id, score, post.visibility)
            return SplitResult(decision.mode, 0, 0, pulled=True)
        lane = self.lane_for(decision.follower_count)
        # Only a post long enough for queue hops to matter keeps pages (decision 0060): one
        # of 1 + JOB_PAGES pages or fewer is one or two jobs, run as before.
        if decision.follower_count <= (1 + constants.JOB_PAGES) * self.settings.fanout_batch_size:
            kept = None
        batches, followers = await self.enqueue_pages(
            post.author_id,
            [(post.id, score)],
            lane,
            job_prefix or post_job_prefix(post.id),
            0,
            enqueue,
            kept,
            keep_all=decision.follower_count
            <= constants.SPLIT_PAGES * self.settings.fanout_batch_size,
        )
        return SplitResult(decision.mode, batches, followers)

    def lane_for(self, follower_count: int) -> str:
        return lanes.BIG if follower_count >= self.settings.big_author_followers else lanes.DEFAULT

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
        """Turn up to SPLIT_PAGES pages of active followers above `after` into FanoutBatch
        jobs, then hand the rest to a continuation job: each job stays short, so a worker
        killed mid-split loses little and the retry (same job ids) repeats nothing.

        The first page is read and queued alone, so its batch runs at once; the others are
        read JOB_PAGES pages at a time, each group queued as one job (one script call per
        page inside it, `BatchWriter.deliver`) while the next group is read: a post to
        50,000 followers is 8 jobs, not 50, so ARQ's per-job pick-up (a poll, a WATCH/MULTI
        claim, a result) no longer sets when its last timelines are written
        (docs/benchmarks/archive.md, "Fan-out, round 4").

        With `kept`, the first read (KEPT_FIRST_READ followers, so Redis has work a few ms
        after the split starts) and the last group are written by this job (the batch's own
        write, beside the reads, each page then told to `kept`) instead of queued (decision
        0060), and with `keep_all` every group (decision 0064): no page waits for a pick-up.
        The job succeeds only once they are written (a failure fails it: its retry writes
        them again, idempotently). Returns (groups queued or delivered, followers in them)."""
        size = self.settings.fanout_batch_size
        since = active_since(self.settings.active_days)
        gate = asyncio.Semaphore(constants.ENQUEUE_CONCURRENCY)

        queued: set[str] = set()  # a group read again on the primary is not queued twice

        async def batch(group: list[int]) -> None:
            job_id = batch_job_id(job_prefix, group[0])
            if job_id in queued:
                return
            queued.add(job_id)
            async with gate:
                await enqueue(
                    lanes.FANOUT_BATCH, author_id, entries, group, job_id=job_id, lane=lane
                )

        in_flight = asyncio.Semaphore(constants.KEPT_GROUPS_IN_FLIGHT)

        async def here(group: list[int]) -> None:
            assert kept is not None
            key = batch_job_id(job_prefix, group[0])
            if key not in queued:  # (a group read again on the primary: written once)
                queued.add(key)
                async with in_flight:
                    await self.writer.deliver(author_id, entries, group)
                    await kept.written(group, lane)

        async def continuation(last: int) -> None:
            await enqueue(
                lanes.FANOUT_PAGES,
                author_id,
                entries,
                lane,
                job_prefix,
                last,
                job_id=f"{job_prefix}:from:{last}",
                lane=lanes.DEFAULT,
            )

        async with asyncio.TaskGroup() as jobs:

            async def read(sessions: async_sessionmaker[AsyncSession]) -> _Groups:
                groups: list[list[int]] = []
                limit = constants.SPLIT_PAGES * size  # followers this job reads at most
                # The first read alone (a page to queue, or less to write at once), then
                # groups of JOB_PAGES pages.
                first = size if kept is None else min(size, constants.KEPT_FIRST_READ)
                cursor, paged, want = after, 0, first
                async with sessions() as session:
                    while paged < limit:
                        want = min(want, limit - paged)
                        last_group = paged + want == limit
                        # The last group reads one id more: is a continuation needed?
                        ids = await active_followers(
                            session, author_id, since, cursor, want + last_group
                        )
                        more = len(ids) > want
                        group = ids[:want]
                        if group:
                            last = len(group) < want or (last_group and not more)
                            keep = kept is not None and (keep_all or not groups or last)
                            jobs.create_task(here(group) if keep else batch(group))
                            groups.append(group)
                        if len(group) < want:
                            break
                        cursor, paged, want = group[-1], paged + want, constants.JOB_PAGES * size
                        if last_group:
                            return _Groups(groups, more)
                return _Groups(groups, False)

            found = await self._follower_pages(entries, read)
            if found.more:
                jobs.create_task(continuation(found.groups[-1][-1]))
        return len(found.groups), sum(len(g) for g in found.groups)

    async def _follower_pages(
        self,
        entries: Sequence[Sequence[int]],
        read: Callable[[async_sessionmaker[AsyncSession]], Awaitable[_Groups]],
    ) -> _Groups:
        """`read` on the replica when it keeps up AND has replayed the newest of these posts,
        else on the primary. Why the post: once the replica has it, it has every follow
        committed before it; a follow committed after it is backfilled from the primary
        (backfill_follow reads the author's posts after the follow), so the pages miss no
        follower the primary would have listed. A stale unfollow only pushes an id the read
        path filters out. A replica failing mid-read: the primary reads again (`read` skips a
        batch it already queued)."""
        replica, replica_sessions = self.replica, self.replica_sessions
        if replica is None or replica_sessions is None or not entries:
            return await read(self.sessions)
        newest = max(int(e[0]) for e in entries)

        async def on_replica() -> _Groups:
            async with replica_sessions() as session:
                if await session.get(Post, newest) is None:
                    raise _NotReplayed
            return await read(replica_sessions)

        async def on_primary() -> _Groups:
            return await read(self.sessions)

        try:
            return await replica.read("fanout_followers", on_replica, on_primary)
        except _NotReplayed:
            REPLICA_READS.labels("fanout_followers", "behind", replica.name).inc()
            return await read(self.sessions)

    async def catch_up(
        self, author_id: int, decision: ModeDecision, enqueue: Enqueue, splitting: int
    ) -> int:
        """After a decision: the catch-up of a switch back to PUSH, this one's or one noted by
        a process that died between its commit and the enqueue (app.fanout.control.
        note_catchup); a note of another mode version is stale. Posts queued for pushing."""
        redis = self.roles.timelines
        pull_since = decision.pull_since
        if pull_since is None:
            pending = await pending_catchup(redis, author_id)
            if pending is None:
                return 0
            version, since_ms = pending
            if version != decision.version or decision.mode != FANOUT_PUSH:
                await catchup_done(redis, author_id)
                return 0
            pull_since = datetime.fromtimestamp(since_ms / 1000, UTC)
        queued = await self._reconcile_pull_era(
            author_id, decision.version, pull_since, enqueue, splitting
        )
        await catchup_done(redis, author_id)
        return queued

    async def _reconcile_pull_era(
        self,
        author_id: int,
        version: int,
        pull_since: datetime,
        enqueue: Enqueue,
        splitting: int,
    ) -> int:
        """Back to PUSH: posts made while in PULL are only in posts:{author}; push them.
        Not `splitting`, the post being split: its own batches push it (if it reaches
        followers), and they alone count its visibility (jobs.tracking).

        On the BIG lane whatever the author's size: a catch-up is no news (readers pulled
        these posts, and keep pulling the author for RECENT_WINDOW after the switch), and
        after a burst it is the burst's whole fan-out (60 posts x 20,000 followers = 1.2M
        inserts), which must not queue ahead of ordinary authors' posts (decision 0027)."""
        # A post created shortly before the switch to PULL may have been split after it;
        # re-pushing a post that was already pushed is a no-op, missing one is not.
        since_ms = int((pull_since - constants.PULL_SWITCH_MARGIN).timestamp() * 1000)
        entries = [
            (post_id, score)
            for post_id, score in await self.store.author_latest(
                author_id, self.settings.author_posts_max
            )
            if score >= since_ms and post_id != splitting
        ]
        if entries:
            await self.enqueue_pages(
                author_id,
                entries,
                lanes.BIG,
                f"rc:{author_id}:{version}",
                0,
                enqueue,
            )
        return len(entries)
