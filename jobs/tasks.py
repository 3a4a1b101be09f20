"""ARQ tasks. Thin: load by id, return quietly if it is gone, call one service method.

The tasks of a post's fan-out (the split, its batches and continuations) carry `track`, the
post id, and report to jobs.tracking as they succeed, so that the reconciler can tell a
completed fan-out from one whose jobs were lost. Retries and dead letters: jobs.reliability.
"""

from __future__ import annotations

from typing import Any

from arq.jobs import Job

from app.fanout import lanes
from app.fanout.lanes import Enqueue
from app.fanout.service import FanoutService
from jobs import reconcile, tracking

TRACKED = (lanes.FANOUT_BATCH, lanes.FANOUT_PAGES)


def _service(ctx: dict[str, Any]) -> FanoutService:
    return ctx["fanout"]  # type: ignore[no-any-return]


def _enqueuer(ctx: dict[str, Any], track: int | None = None) -> Enqueue:
    """The service's way to schedule follow-up jobs on this worker's ARQ connection; with
    `track`, each job is owed by that post's fan-out before it is queued."""
    redis = ctx["redis"]

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        if track is None or function not in TRACKED:
            await redis.enqueue_job(function, *args, _job_id=job_id, _queue_name=lane)
            return
        await tracking.owe(redis, track, [job_id])
        job = await redis.enqueue_job(
            function, *args, _job_id=job_id, _queue_name=lane, track=track
        )
        if job is None:
            # Queued before (a retried split): running or waiting it will settle itself; if
            # its result says it succeeded, it is owed no more.
            info = await Job(job_id, redis, _queue_name=lane).result_info()
            if info is not None and info.success:
                await tracking.settle(redis, track, job_id)

    return enqueue


async def fanout_post(ctx: dict[str, Any], post_id: int, job_prefix: str | None = None) -> int:
    """The root of a post's fan-out (`job_prefix`: the reconciler's re-run ids)."""
    redis, job_id = ctx["redis"], ctx["job_id"]
    await tracking.owe(redis, post_id, [job_id])
    result = await _service(ctx).split_post(post_id, _enqueuer(ctx, post_id), job_prefix)
    await tracking.settle(redis, post_id, job_id)
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
    batches, _ = await _service(ctx).enqueue_pages(
        author_id, entries, lane, job_prefix, after, _enqueuer(ctx, track)
    )
    if track is not None:
        await tracking.settle(ctx["redis"], track, ctx["job_id"])
    return batches


async def fanout_batch(
    ctx: dict[str, Any],
    author_id: int,
    entries: list[list[int]],
    user_ids: list[int],
    track: int | None = None,
) -> int:
    written = await _service(ctx).deliver(author_id, entries, user_ids)
    if track is not None:
        await tracking.settle(ctx["redis"], track, ctx["job_id"])
    return written


async def backfill_follow(ctx: dict[str, Any], follower_id: int, followee_id: int) -> int:
    return await _service(ctx).backfill_follow(follower_id, followee_id)


async def cleanup_author(ctx: dict[str, Any], user_id: int, author_id: int) -> int:
    return await _service(ctx).cleanup_author(user_id, author_id)


async def post_changed(ctx: dict[str, Any], post_id: int) -> None:
    await _service(ctx).post_changed(post_id)


async def reconcile_fanouts(ctx: dict[str, Any], grace_seconds: int | None = None) -> int:
    """Cron (every minute): re-run fan-outs that never completed; how many were re-run."""
    return await reconcile.run(ctx, grace_seconds)
