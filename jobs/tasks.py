"""ARQ tasks. Thin: load by id, return quietly if it is gone, call one service method.

The tasks of a post's fan-out (the split, its batches and continuations) carry `track`, the
post id, and report to jobs.tracking as they succeed, so that the reconciler can tell a
completed fan-out from one whose jobs were lost. Retries and dead letters: jobs.reliability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from arq.jobs import Job

from app.coalesce import Coalesced
from app.fanout import lanes
from app.fanout.lanes import Enqueue
from app.fanout.service import FanoutService
from app.posts import pruning
from jobs import marks, reconcile, tracking

TRACKED = (lanes.FANOUT_BATCH, lanes.FANOUT_PAGES)


def _service(ctx: dict[str, Any]) -> FanoutService:
    return ctx["fanout"]  # type: ignore[no-any-return]


def _carries(entries: Sequence[Sequence[int]], post_id: int | None) -> bool:
    """Do these jobs deliver the tracked post itself? (A split that switched its author back
    to PUSH also queues the pull-era posts' batches; they are owed, not counted.)"""
    return post_id is not None and any(int(e[0]) == post_id for e in entries)


@dataclass
class _Plan:
    """What one planning job (the split, a continuation) queued for its own post, as
    enqueued: followers paged into batches, the continuation's cursor, the batches' lane."""

    followers: int = 0
    continues_after: int | None = None
    lane: str = lanes.DEFAULT
    written: int = 0  # followers of its pages the planning job wrote itself (`_Kept`)

    def progress(self, chunk: int) -> tracking.Progress:
        return tracking.Progress(
            planned=self.followers,
            written=self.written,
            chunk=chunk,
            continues_after=self.continues_after,
        )


def _ttl(ctx: dict[str, Any]) -> int:
    """How long this worker keeps a post's fan-out tracking (`jobs.tracking`)."""
    return marks.ttl_seconds(ctx["state"].settings)


def _enqueuer(ctx: dict[str, Any], track: int | None = None, plan: _Plan | None = None) -> Enqueue:
    """The service's way to schedule follow-up jobs on this worker's ARQ connection; with
    `track`, each job is owed by that post's fan-out before it is queued, and what it plans
    for the post is noted in `plan`."""
    redis = ctx["redis"]

    async def owe_many(job_ids: list[str]) -> list[None]:
        """The jobs queued together (a split queues 16 at a time) are owed in one round trip."""
        assert track is not None  # only a tracked post's jobs are owed
        await tracking.owe(redis, track, job_ids, ttl=_ttl(ctx))
        return [None] * len(job_ids)

    owe: Coalesced[str, None] = Coalesced(owe_many)

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        if track is None or function not in TRACKED:
            await redis.enqueue_job(function, *args, _job_id=job_id, _queue_name=lane)
            return
        if plan is not None and _carries(args[1], track):
            if function == lanes.FANOUT_BATCH:  # (author, entries, user ids)
                plan.followers += len(args[2])
                plan.lane = lane
            else:  # (author, entries, lane, job prefix, after)
                plan.continues_after = int(args[4])
        await owe(job_id)
        job = await redis.enqueue_job(
            function, *args, _job_id=job_id, _queue_name=lane, track=track
        )
        if job is None:
            # Queued before (a retried split): running or waiting it will settle itself; if
            # its result says it succeeded, it is owed no more.
            info = await Job(job_id, redis, _queue_name=lane).result_info()
            if info is not None and info.success:
                await tracking.settle(redis, track, job_id, ttl=_ttl(ctx))

    return enqueue


@dataclass
class _Kept:
    """A planning job's account of the pages of its own post it writes itself (decisions
    0060, 0064; `app.fanout.split.KeptPages`): counted in the job's tracking step, sent when
    the job succeeds, so those pages are planned and written once whatever is retried. The
    first page written marks the post first visible at once (`tracking.first_visible`)."""

    ctx: dict[str, Any]
    plan: _Plan
    track: int

    async def written(self, user_ids: list[int], lane: str) -> None:
        plan = self.plan
        first = plan.written == 0
        plan.followers += len(user_ids)
        plan.written += len(user_ids)
        plan.lane = lane
        if first and user_ids:
            await tracking.first_visible(self.ctx["redis"], self.track, lane, ttl=_ttl(self.ctx))


async def fanout_post(
    ctx: dict[str, Any], post_id: int, job_prefix: str | None = None, widening: int | None = None
) -> int:
    """The root of a post's fan-out (`job_prefix`: the reconciler's re-run ids, or a
    widening's; `widening`: the version a widening gave the post, decision 0067); it writes
    its first page and last group itself, every page when the author has at most SPLIT_PAGES
    pages of followers (`_Kept`, decisions 0060, 0064)."""
    redis, job_id = ctx["redis"], ctx["job_id"]
    await tracking.owe(redis, post_id, [job_id], ttl=_ttl(ctx))
    plan = _Plan()
    result = await _service(ctx).split_post(
        post_id,
        _enqueuer(ctx, post_id, plan),
        job_prefix,
        _Kept(ctx, plan, post_id),
        widening=widening,
    )
    if result is not None and result.pulled:
        await tracking.visible_at_once(redis, post_id, ttl=_ttl(ctx))
    await tracking.settle(redis, post_id, job_id, plan.progress(chunk=0), plan.lane, ttl=_ttl(ctx))
    return result.batches if result else 0


async def fanout_pages(
    ctx: dict[str, Any],
    author_id: int,
    entries: list[list[int]],
    lane: str,
    job_prefix: str,
    after: int,
    track: int | None = None,
) -> int:
    plan = _Plan(lane=lane)
    mine = _carries(entries, track)  # the post's own pages: the first and last kept here
    batches, _ = await _service(ctx).enqueue_pages(
        author_id,
        entries,
        lane,
        job_prefix,
        after,
        _enqueuer(ctx, track, plan),
        _Kept(ctx, plan, track) if mine and track is not None else None,
    )
    if track is not None:
        progress = plan.progress(chunk=after) if mine else tracking.Progress()
        await tracking.settle(ctx["redis"], track, ctx["job_id"], progress, lane, ttl=_ttl(ctx))
    return batches


async def fanout_batch(
    ctx: dict[str, Any],
    author_id: int,
    entries: list[list[int]],
    user_ids: list[int],
    track: int | None = None,
) -> int:
    """One post's batch on one server: the insert, the live counts and the tracking step in
    one call (decision 0049); otherwise the step is its own round trip after the insert."""
    service = _service(ctx)
    lane = ctx.get("lane", lanes.DEFAULT)
    tail = None
    if track is not None:
        mine = len(user_ids) if _carries(entries, track) else 0
        progress = tracking.Progress(written=mine)
        if _same_server(ctx["redis"], service.store.redis):
            tail = tracking.settle_tail(track, ctx["job_id"], progress, ttl=_ttl(ctx))
    written = await service.deliver(author_id, entries, user_ids, tail)
    if track is not None:
        if tail is not None and tail.reply is not None:
            tracking.settled(track, tail, lane)
        else:
            await tracking.settle(ctx["redis"], track, ctx["job_id"], progress, lane, ttl=_ttl(ctx))
    return written


def _same_server(arq: Any, redis: Any) -> bool:
    """Do ARQ's connection and the timelines' reach the same standalone server and db (so
    the job's tracking can ride in the timelines' script call)?"""
    pool = getattr(redis, "connection_pool", None)
    if pool is None or getattr(arq, "connection_pool", None) is None:
        return False
    mine, theirs = arq.connection_pool.connection_kwargs, pool.connection_kwargs
    where = ("host", "port", "db", "path")
    return all(mine.get(k) == theirs.get(k) for k in where)


async def backfill_follow(ctx: dict[str, Any], follower_id: int, followee_id: int) -> int:
    return await _service(ctx).backfill_follow(follower_id, followee_id)


async def cleanup_author(ctx: dict[str, Any], user_id: int, author_id: int) -> int:
    return await _service(ctx).cleanup_author(user_id, author_id)


async def post_changed(ctx: dict[str, Any], post_id: int) -> None:
    await _service(ctx).post_changed(post_id)


async def review_fanout_modes(
    ctx: dict[str, Any], limit: int | None = None, interval_seconds: float | None = None
) -> int:
    """Cron (every FANOUT_REVIEW_SECONDS): decide again the mode of at most `limit`
    (FANOUT_REVIEW_MAX_AUTHORS) authors whose inputs changed lately, so an author whose burst
    is over goes back to PUSH without posting again; how many switched."""
    service = _service(ctx)
    settings = service.settings
    return await service.review_pass(
        _enqueuer(ctx),
        limit or settings.fanout_review_max_authors,
        settings.fanout_review_seconds if interval_seconds is None else interval_seconds,
    )


async def prune_canary_posts(ctx: dict[str, Any]) -> int:
    """Cron (every CANARY_PRUNE_MINUTES): delete the synthetic probe's posts older than
    CANARY_POSTS_RETENTION_SECONDS (app.posts.pruning, decision 0065); how many."""
    state = ctx["state"]
    settings = state.settings
    return await pruning.prune_canary_posts(
        state.sessions, settings.canary_posts_retention_seconds, settings.canary_prune_batch
    )


async def reconcile_fanouts(ctx: dict[str, Any], grace_seconds: int | None = None) -> int:
    """Cron (every minute): re-run fan-outs that never completed; how many were re-run."""
    return await reconcile.run(ctx, grace_seconds)
