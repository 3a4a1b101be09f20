"""ARQ worker settings, one class per lane: `arq jobs.worker.WorkerSettings` (default lane)
and `arq jobs.worker.BigLaneWorkerSettings` (big authors' batches); `python -m arq ...` works
the same. Every task runs inside jobs.reliability (retries with backoff, then dead letters);
the default lane's workers also run the fan-out reconciler every minute (jobs.reconcile)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from arq import cron
from arq.connections import RedisSettings
from arq.typing import WorkerCoroutine
from arq.worker import Function, func

from app.config import get_settings
from app.fanout import lanes
from app.state import create_state
from jobs import tasks
from jobs.reliability import ARQ_EXTRA_TRIES, ARQ_TIMEOUT_MARGIN_SECONDS, reliable

RECONCILE = "reconcile_fanouts"


def redis_settings() -> RedisSettings:
    return RedisSettings.from_dsn(get_settings().redis_url)


def _startup(lane: str) -> Callable[[dict[str, Any]], Awaitable[None]]:
    async def startup(ctx: dict[str, Any]) -> None:
        state = create_state(pool_size=5)
        ctx["state"] = state
        ctx["fanout"] = state.fanout
        ctx["lane"] = lane  # where a dead letter is replayed

    return startup


async def shutdown(ctx: dict[str, Any]) -> None:
    if "state" in ctx:
        await ctx["state"].close()


def _function(name: str, task: Callable[..., Awaitable[Any]]) -> Function:
    return func(cast(WorkerCoroutine, reliable(name, task)), name=name)


FUNCTIONS = [
    _function(lanes.FANOUT_POST, tasks.fanout_post),
    _function(lanes.FANOUT_PAGES, tasks.fanout_pages),
    _function(lanes.FANOUT_BATCH, tasks.fanout_batch),
    _function(lanes.BACKFILL_FOLLOW, tasks.backfill_follow),
    _function(lanes.CLEANUP_AUTHOR, tasks.cleanup_author),
    _function(lanes.POST_CHANGED, tasks.post_changed),
]
# Every minute at :00 (ARQ runs a cron job once across workers: `unique`); tests and
# operators may also enqueue it by name with a grace in seconds.
RECONCILER = cron(tasks.reconcile_fanouts, name=RECONCILE, second=0, unique=True)


def lane_settings(queue_name: str, max_jobs: int) -> dict[str, Any]:
    """ARQ reads a settings class's own __dict__ only (no inheritance), so lanes are dicts."""
    settings = get_settings()
    return {
        "functions": FUNCTIONS,
        "cron_jobs": [RECONCILER] if queue_name == lanes.DEFAULT else [],
        "queue_name": queue_name,
        "on_startup": _startup(queue_name),
        "on_shutdown": shutdown,
        "redis_settings": redis_settings(),
        "max_jobs": max_jobs,
        # jobs.reliability applies JOB_TIMEOUT_SECONDS itself (a timeout is retried); ARQ's
        # own limits sit above as backstops.
        "job_timeout": settings.job_timeout_seconds + ARQ_TIMEOUT_MARGIN_SECONDS,
        "max_tries": settings.job_max_tries + ARQ_EXTRA_TRIES,
        # Job ids double as dedupe keys for replayed events for an hour (a dead letter's
        # replay clears its failed result first: jobs.dead_letters).
        "keep_result": 3600,
        "health_check_interval": 5,
        # ARQ polls its queue (no blocking pop): 20 ms bounds the pick-up latency of a post
        # at ~50 cheap ZRANGEBYSCOREs per second per idle worker.
        "poll_delay": 0.02,
    }


WorkerSettings = lane_settings(lanes.DEFAULT, max_jobs=20)
BigLaneWorkerSettings = lane_settings(lanes.BIG, max_jobs=10)
