"""The fan-out reconciler, an ARQ cron job (every minute on the default lane's workers).

Retries and dead letters cover a job that fails; they do not cover a job that vanished: a
queue lost with a Redis that had no persistence, a job deleted by hand, a split whose
FanoutBatch jobs were lost. The reconciler walks the PostCreated events relayed between
RECONCILE_WINDOW_SECONDS and RECONCILE_GRACE_SECONDS ago, and for each post whose fan-out is
not marked complete (jobs.tracking) and has no job left queued, waiting or running, runs the
split again under fresh job ids (`rf:<post_id>:<attempt>`); every fan-out job is idempotent,
so what was delivered before is written again as a no-op. At most RECONCILE_MAX_POSTS re-runs
per pass and RECONCILE_MAX_ATTEMPTS per post; past that the post becomes a dead letter
(`python -m jobs.dead_letters replay`) instead of being retried every minute.
"""

from __future__ import annotations

import logging
from typing import Any

from app.config import get_settings
from app.fanout import lanes
from app.observability.metrics import FANOUT_RECONCILED
from app.outbox import events
from app.outbox.relay import jobs_for, published_posts
from jobs import dead_letters, tracking

log = logging.getLogger("jobs.reconcile")
CHUNK = 2000  # events read and checked per round trip


def rerun_job_id(post_id: int, attempt: int) -> str:
    """The job id of a re-run, also the prefix of its batches' ids."""
    return f"rf:{post_id}:{attempt}"


async def run(ctx: dict[str, Any], grace_seconds: int | None = None) -> int:
    """One pass; how many fan-outs it re-ran."""
    settings = get_settings()
    redis, engine = ctx["redis"], ctx["state"].engine
    grace = settings.reconcile_grace_seconds if grace_seconds is None else grace_seconds
    rerun, after = 0, 0
    while rerun < settings.reconcile_max_posts:
        rows = await published_posts(engine, grace, settings.reconcile_window_seconds, after, CHUNK)
        if not rows:
            break
        after = rows[-1][0]
        done = await tracking.finished(redis, [post_id for _, post_id in rows])
        for (event_id, post_id), complete in zip(rows, done, strict=True):
            if complete:
                continue
            event = jobs_for(event_id, events.POST_CREATED, {"post_id": post_id})
            relayed = [job.job_id for job in event]
            if await tracking.alive(redis, post_id, relayed):
                continue
            if await _rerun(ctx, post_id):
                rerun += 1
                if rerun >= settings.reconcile_max_posts:
                    break
    return rerun


async def _rerun(ctx: dict[str, Any], post_id: int) -> bool:
    settings, redis = get_settings(), ctx["redis"]
    attempt = await tracking.next_attempt(redis, post_id)
    job_id = rerun_job_id(post_id, attempt)
    if attempt > settings.reconcile_max_attempts:
        await tracking.mark(redis, post_id, tracking.GAVE_UP)
        await tracking.restart(redis, post_id, job_id)  # a replay of it then completes it
        await dead_letters.record(
            redis,
            dead_letters.DeadLetter(
                job_id=job_id,
                function=lanes.FANOUT_POST,
                args=[post_id],
                kwargs={"job_prefix": job_id},
                error=f"fan-out incomplete after {attempt - 1} reconciler re-runs",
                tries=attempt - 1,
            ),
        )
        FANOUT_RECONCILED.labels("gave_up").inc()
        log.error("post %s: fan-out still incomplete; dead letter %s", post_id, job_id)
        return False
    await tracking.restart(redis, post_id, job_id)
    await redis.enqueue_job(
        lanes.FANOUT_POST, post_id, job_id, _job_id=job_id, _queue_name=lanes.DEFAULT
    )
    FANOUT_RECONCILED.labels("rerun").inc()
    log.warning("post %s: fan-out never completed; re-run as %s", post_id, job_id)
    return True
