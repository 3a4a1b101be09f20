"""ARQ worker settings, one class per lane: `arq jobs.worker.WorkerSettings` (default lane)
and `arq jobs.worker.BigLaneWorkerSettings` (big authors' batches)."""

from __future__ import annotations

from typing import Any

from arq.connections import RedisSettings
from arq.worker import func

from app.config import get_settings
from app.fanout import lanes
from app.state import create_state
from jobs import tasks


def redis_settings() -> RedisSettings:
    return RedisSettings.from_dsn(get_settings().redis_url)


async def startup(ctx: dict[str, Any]) -> None:
    state = create_state(pool_size=5)
    ctx["state"] = state
    ctx["fanout"] = state.fanout


async def shutdown(ctx: dict[str, Any]) -> None:
    if "state" in ctx:
        await ctx["state"].close()


FUNCTIONS = [
    func(tasks.fanout_post, name=lanes.FANOUT_POST),
    func(tasks.fanout_pages, name=lanes.FANOUT_PAGES),
    func(tasks.fanout_batch, name=lanes.FANOUT_BATCH),
    func(tasks.backfill_follow, name=lanes.BACKFILL_FOLLOW),
    func(tasks.cleanup_author, name=lanes.CLEANUP_AUTHOR),
    func(tasks.post_changed, name=lanes.POST_CHANGED),
]


def lane_settings(queue_name: str, max_jobs: int) -> dict[str, Any]:
    """ARQ reads a settings class's own __dict__ only (no inheritance), so lanes are dicts."""
    settings = get_settings()
    return {
        "functions": FUNCTIONS,
        "queue_name": queue_name,
        "on_startup": startup,
        "on_shutdown": shutdown,
        "redis_settings": redis_settings(),
        "max_jobs": max_jobs,
        "job_timeout": settings.job_timeout_seconds,
        "max_tries": 10,
        # Job ids double as dedupe keys for replayed events for an hour.
        "keep_result": 3600,
        "health_check_interval": 5,
        # ARQ polls its queue (no blocking pop): 20 ms bounds the pick-up latency of a post
        # at ~50 cheap ZRANGEBYSCOREs per second per idle worker.
        "poll_delay": 0.02,
    }


WorkerSettings = lane_settings(lanes.DEFAULT, max_jobs=20)
BigLaneWorkerSettings = lane_settings(lanes.BIG, max_jobs=10)
