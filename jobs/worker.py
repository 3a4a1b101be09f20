"""ARQ worker settings, one class per lane: `arq jobs.worker.WorkerSettings` (default lane)
and `arq jobs.worker.BigLaneWorkerSettings` (big authors' batches); `python -m arq ...` works
the same. Every task runs inside jobs.reliability (retries with backoff, then dead letters);
the default lane's workers also run the reconciler every minute (jobs.reconcile) and the
fan-out control plane's periodic pass every FANOUT_REVIEW_SECONDS. Jobs wait in
the queue up to JOB_EXPIRES_SECONDS (ARQ's `expires`) before ARQ would drop them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from arq import cron
from arq.cron import CronJob
from arq.typing import WorkerCoroutine
from arq.worker import Function, func

from app.config import get_settings, is_sentinel_url
from app.fanout import lanes
from app.observability.quiet_logs import quiet_worker
from app.state import create_state
from jobs import constants, engagement, housekeeping, media, sigterm, tasks
from jobs.connections import expires_ms, queue_fence, redis_settings, worker_pool
from jobs.event_tracking import settling
from jobs.reliability import arq_max_tries, reliable

# A SIGTERM ends the worker on Python 3.11 too (jobs.sigterm; decision 0093).
sigterm.install()

RECONCILE = "reconcile_fanouts"
REVIEW = "review_fanout_modes"
PRUNE = "prune_expired_keys"
PRUNE_CANARIES = "prune_canary_posts"


def _startup(lane: str) -> Callable[[dict[str, Any]], Awaitable[None]]:
    async def startup(ctx: dict[str, Any]) -> None:
        # LOG_LEVEL: jobs done fine summed up once a minute, not a line each (decision 0085).
        quiet_worker(get_settings(), "worker" if lane == lanes.DEFAULT else "worker-big")
        state = create_state(pool_size=5)
        ctx["state"] = state
        ctx["fanout"] = state.fanout
        ctx["engagement"] = state.engagement  # the log's writer (flushed by state.close)
        ctx["lane"] = lane  # where a dead letter is replayed
        # A queue that fails over: jobs check its master did not change under them (0091).
        if is_sentinel_url(state.settings.redis_role_url("queue")):
            ctx["queue_fence"] = queue_fence(state.settings, ctx["redis"])

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
    # An outbox event's own jobs mark themselves done for the reconciler (jobs.event_tracking).
    _function(lanes.BACKFILL_FOLLOW, settling(tasks.backfill_follow)),
    _function(lanes.CLEANUP_AUTHOR, settling(tasks.cleanup_author)),
    _function(lanes.POST_CHANGED, settling(tasks.post_changed)),
    # The periodic pass by name (tests, operators), also where its cron is off; not retried.
    func(cast(WorkerCoroutine, tasks.review_fanout_modes), name=REVIEW),
    # Expired idempotency keys and old widenings (jobs.housekeeping), by name too; not retried.
    func(cast(WorkerCoroutine, housekeeping.prune_expired_keys), name=PRUNE),
    # The canaries' posts pruned by name as well (the next run does what one missed).
    func(cast(WorkerCoroutine, tasks.prune_canary_posts), name=PRUNE_CANARIES),
    # The engagement log's partitions and features (jobs.engagement), by name too.
    func(cast(WorkerCoroutine, engagement.engagement_partitions), name=engagement.PARTITIONS),
    func(cast(WorkerCoroutine, engagement.engagement_features), name=engagement.FEATURES),
    # Uploads never attached and media no live post uses (jobs.media), by name too.
    func(cast(WorkerCoroutine, media.media_cleanup), name=media.CLEANUP),
]
# Every minute at :00 (ARQ runs a cron job once across workers: `unique`); tests and
# operators may also enqueue it by name with a grace in seconds.
RECONCILER = cron(tasks.reconcile_fanouts, name=RECONCILE, second=0, unique=True)
# Every PRUNE_EVERY_MINUTES at :30 (away from the reconciler's :00), once across workers;
# named apart from the task by name (a cron's result is not kept, the task's is).
PRUNER = cron(
    housekeeping.prune_expired_keys,
    name="housekeeping",
    minute=set(range(0, 60, constants.PRUNE_EVERY_MINUTES)),
    second=30,
    unique=True,
)


def reviewer(every_seconds: int) -> list[CronJob]:
    """The control plane's periodic pass (FANOUT_REVIEW_SECONDS; 0: none): at the seconds of
    each minute divisible by it, once across workers; tests enqueue it by name too. Like the
    reconciler it is not retried: a failed pass is followed by the next one within seconds."""
    if every_seconds <= 0:
        return []
    seconds = set(range(0, 60, every_seconds))
    return [cron(tasks.review_fanout_modes, name=REVIEW, second=seconds, unique=True)]


def canary_pruner(every_minutes: int) -> list[CronJob]:
    """The synthetic probe's old posts deleted every so many minutes (0: never), at :30 so
    it does not start with the reconciler (decision 0065)."""
    if every_minutes <= 0:
        return []
    minutes = set(range(0, 60, every_minutes))
    job = cron(
        tasks.prune_canary_posts, name=PRUNE_CANARIES, minute=minutes, second=30, unique=True
    )
    return [job]


def engagement_jobs(quality_minutes: int) -> list[CronJob]:
    """The engagement log's partitions hourly at :05 and its features every so many minutes
    (0: only by name) at :45, each once across workers (jobs.engagement)."""
    jobs = [
        cron(
            engagement.engagement_partitions,
            name=f"cron_{engagement.PARTITIONS}",
            minute=5,
            second=0,
            unique=True,
        )
    ]
    if quality_minutes > 0:
        minutes = set(range(0, 60, quality_minutes))
        jobs.append(
            cron(
                engagement.engagement_features,
                name=f"cron_{engagement.FEATURES}",
                minute=minutes,
                second=45,
                unique=True,
            )
        )
    return jobs


def media_jobs(every_minutes: int) -> list[CronJob]:
    """The media cleanup every so many minutes (0: only by name) at :15, away from the
    reconciler's :00 and the pruners' :30, once across workers (jobs.media)."""
    if every_minutes <= 0:
        return []
    minutes = set(range(0, 60, every_minutes))
    return [
        cron(
            media.media_cleanup,
            name=f"cron_{media.CLEANUP}",
            minute=minutes,
            second=15,
            unique=True,
        )
    ]


def lane_settings(queue_name: str, max_jobs: int) -> dict[str, Any]:
    """ARQ reads a settings class's own __dict__ only (no inheritance), so lanes are dicts."""
    settings = get_settings()
    return {
        "functions": FUNCTIONS,
        "cron_jobs": (
            [
                RECONCILER,
                PRUNER,
                *reviewer(settings.fanout_review_seconds),
                *canary_pruner(settings.canary_prune_minutes),
                *engagement_jobs(settings.engagement_quality_minutes),
                *media_jobs(settings.media_cleanup_minutes),
            ]
            if queue_name == lanes.DEFAULT
            else []
        ),
        "queue_name": queue_name,
        "on_startup": _startup(queue_name),
        "on_shutdown": shutdown,
        "redis_settings": redis_settings(settings),
        # A Sentinel-named queue: the worker's own connection, which rides out a failover
        # (jobs.connections.worker_pool; decision 0091). None: ARQ's from redis_settings.
        "redis_pool": worker_pool(settings, queue_name),
        "max_jobs": max_jobs,
        # jobs.reliability applies JOB_TIMEOUT_SECONDS itself (a timeout is retried); ARQ's
        # own limits sit above as backstops.
        "job_timeout": settings.job_timeout_seconds + constants.ARQ_TIMEOUT_MARGIN_SECONDS,
        "max_tries": arq_max_tries(settings.job_max_tries),
        # ARQ drops a job still queued past its `expires` (default: a day) without running
        # it; a week outlasts an outage (the follow-up jobs these workers queue, too).
        "expires_extra_ms": expires_ms(settings),
        # Job ids double as dedupe keys for replayed events for an hour (a dead letter's
        # replay clears its failed result first: jobs.dead_letters).
        "keep_result": 3600,
        "health_check_interval": 5,
        # ARQ polls its queue (no blocking pop): POLL_SECONDS bounds the pick-up latency of
        # a post (decision 0064).
        "poll_delay": constants.POLL_SECONDS,
    }


WorkerSettings = lane_settings(lanes.DEFAULT, max_jobs=20)
BigLaneWorkerSettings = lane_settings(lanes.BIG, max_jobs=10)
