"""ARQ tasks. Thin: load by id, return quietly if it is gone, call one service method."""

from __future__ import annotations

from typing import Any

from app.fanout.lanes import Enqueue
from app.fanout.service import FanoutService


def _service(ctx: dict[str, Any]) -> FanoutService:
    return ctx["fanout"]  # type: ignore[no-any-return]


def _enqueuer(ctx: dict[str, Any]) -> Enqueue:
    """The service's way to schedule follow-up jobs on this worker's ARQ connection."""

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        await ctx["redis"].enqueue_job(function, *args, _job_id=job_id, _queue_name=lane)

    return enqueue


async def fanout_post(ctx: dict[str, Any], post_id: int) -> int:
    result = await _service(ctx).split_post(post_id, _enqueuer(ctx))
    return result.batches if result else 0


async def fanout_pages(
    ctx: dict[str, Any],
    author_id: int,
    entries: list[list[int]],
    lane: str,
    job_prefix: str,
    after: int,
) -> int:
    batches, _ = await _service(ctx).enqueue_pages(
        author_id, entries, lane, job_prefix, after, _enqueuer(ctx)
    )
    return batches


async def fanout_batch(
    ctx: dict[str, Any], author_id: int, entries: list[list[int]], user_ids: list[int]
) -> int:
    return await _service(ctx).deliver(author_id, entries, user_ids)


async def backfill_follow(ctx: dict[str, Any], follower_id: int, followee_id: int) -> int:
    return await _service(ctx).backfill_follow(follower_id, followee_id)


async def cleanup_author(ctx: dict[str, Any], user_id: int, author_id: int) -> int:
    return await _service(ctx).cleanup_author(user_id, author_id)


async def post_changed(ctx: dict[str, Any], post_id: int) -> None:
    await _service(ctx).post_changed(post_id)
