"""The reconciler, an ARQ cron job (every minute on the default lane's workers): every outbox
event's jobs run to the end, or end as a dead letter.

Retries and dead letters cover a job that fails; they do not cover a job that vanished or that
ARQ dropped without running it: a queue lost with a Redis that had no persistence, a job
deleted by hand, a key that expired in the queue, a job whose worker died in every try (ARQ
fails it past `max_tries` without calling it), a split whose FanoutBatch jobs were lost. The
reconciler walks the events relayed between RECONCILE_WINDOW_SECONDS and
RECONCILE_GRACE_SECONDS ago, and re-runs under fresh job ids what is neither done nor queued,
waiting or running:

- PostCreated: the post's fan-out (jobs.tracking), as the split `rf:<post_id>:<attempt>`;
- every other event (follow backfill, unfollow/block cleanups, post changes): each of its jobs
  not done (jobs.event_tracking), as `<job id>:r<attempt>`.

Every job is idempotent, so what was delivered before is written again as a no-op. Bounded
work per pass: at most RECONCILE_MAX_EVENTS events checked (the next pass goes on from the
last one, so a busy window is covered over several passes), RECONCILE_MAX_POSTS re-runs, and
RECONCILE_MAX_ATTEMPTS re-runs per post or job; past that it becomes a dead letter
(`python -m jobs.dead_letters replay`) instead of being retried every minute.
"""

from __future__ import annotations

import logging
from typing import Any

from arq.connections import ArqRedis

from app.config import Settings
from app.fanout import lanes
from app.observability.metrics import FANOUT_RECONCILED, JOBS_DEAD_LETTERED
from app.outbox import events
from app.relay import Job, Published, jobs_for, published_events
from jobs import constants, dead_letters, event_tracking, marks, tracking

log = logging.getLogger("jobs.reconcile")
CURSOR = "rcn:after"  # string: the last event id the previous pass checked (0: start over)


def rerun_job_id(post_id: int, attempt: int) -> str:
    """The job id of a fan-out re-run, also the prefix of its batches' ids."""
    return f"rf:{post_id}:{attempt}"


async def run(ctx: dict[str, Any], grace_seconds: int | None = None) -> int:
    """One pass; how many fan-outs and event jobs it re-ran."""
    settings = ctx["state"].settings
    redis, engine = ctx["redis"], ctx["state"].engine
    grace = settings.reconcile_grace_seconds if grace_seconds is None else grace_seconds
    after = int(await redis.get(CURSOR) or 0)
    rerun = checked = 0
    while rerun < settings.reconcile_max_posts and checked < settings.reconcile_max_events:
        n = min(constants.RECONCILE_CHUNK, settings.reconcile_max_events - checked)
        rows = await published_events(engine, grace, settings.reconcile_window_seconds, after, n)
        if rows:
            done, after = await _check(ctx, rows, settings.reconcile_max_posts - rerun)
            rerun += done
            checked += len(rows)
        if len(rows) < n and (not rows or after == rows[-1].event_id):
            after = 0  # the end of the window: the next pass starts at its beginning
            break
    await redis.set(CURSOR, after, ex=settings.reconcile_window_seconds)
    return rerun


async def _check(ctx: dict[str, Any], rows: list[Published], budget: int) -> tuple[int, int]:
    """Re-run what `rows` left undone, at most `budget` times; (re-runs, last event id
    checked)."""
    redis = ctx["redis"]
    posts = [
        (r.event_id, r.payload["post_id"]) for r in rows if r.event_type == events.POST_CREATED
    ]
    widenings = {
        r.event_id: r.payload["widening"]
        for r in rows
        if r.event_type == events.POST_CREATED and r.payload.get("widening") is not None
    }
    jobs = [
        (r.event_id, job)
        for r in rows
        if r.event_type != events.POST_CREATED
        for job in jobs_for(r.event_id, r.event_type, r.payload)
    ]
    posts_done = dict(
        zip(
            posts,
            await marks.finished(redis, [tracking.state_key(p) for _, p in posts]),
            strict=True,
        )
    )
    jobs_done = dict(
        zip(
            [job.job_id for _, job in jobs],
            await marks.finished(redis, [event_tracking.state_key(job.job_id) for _, job in jobs]),
            strict=True,
        )
    )
    todo: list[tuple[int, int | Job]] = [
        (event_id, post_id) for event_id, post_id in posts if not posts_done[(event_id, post_id)]
    ]
    undone = [(event_id, job) for event_id, job in jobs if not jobs_done[job.job_id]]
    running = await event_tracking.alive(redis, [job.job_id for _, job in undone])
    todo += [item for item, alive in zip(undone, running, strict=True) if not alive]
    todo.sort(key=lambda item: item[0])
    rerun = 0
    for event_id, item in todo:
        if isinstance(item, Job):
            rerun += await _rerun_job(redis, item, ctx["state"].settings)
        else:
            rerun += await _rerun_fan_out(ctx, event_id, item, widenings.get(event_id))
        if rerun >= budget:
            return rerun, event_id
    return rerun, rows[-1].event_id


async def _rerun_fan_out(
    ctx: dict[str, Any], event_id: int, post_id: int, widening: int | None = None
) -> int:
    """`widening`: the version of a widening's event (its fan-out is one per (post,
    version), and counted and overtaken as such: decision 0067)."""
    redis = ctx["redis"]
    payload: dict[str, Any] = {"post_id": post_id}
    if widening is not None:
        payload["widening"] = widening
    relayed = [job.job_id for job in jobs_for(event_id, events.POST_CREATED, payload)]
    if await tracking.alive(redis, post_id, relayed):
        return 0
    settings = ctx["state"].settings
    ttl = marks.ttl_seconds(settings)
    attempt = await marks.next_attempt(redis, tracking.state_key(post_id), ttl=ttl)
    job_id = rerun_job_id(post_id, attempt)
    if attempt > settings.reconcile_max_attempts:
        await marks.mark(redis, tracking.state_key(post_id), marks.GAVE_UP, ttl=ttl)
        # A replay of it then completes it.
        await tracking.restart(redis, post_id, job_id, ttl=ttl)
        await dead_letters.record(
            redis,
            dead_letters.DeadLetter(
                job_id=job_id,
                function=lanes.FANOUT_POST,
                args=[post_id],
                kwargs={
                    "job_prefix": job_id,
                    **({} if widening is None else {"widening": widening}),
                },
                error=f"fan-out incomplete after {attempt - 1} reconciler re-runs",
                tries=attempt - 1,
            ),
        )
        FANOUT_RECONCILED.labels("gave_up").inc()
        log.error("post %s: fan-out still incomplete; dead letter %s", post_id, job_id)
        return 0
    await tracking.restart(redis, post_id, job_id, ttl=ttl)
    more = () if widening is None else (widening,)
    await redis.enqueue_job(
        lanes.FANOUT_POST, post_id, job_id, *more, _job_id=job_id, _queue_name=lanes.DEFAULT
    )
    FANOUT_RECONCILED.labels("rerun").inc()
    log.warning("post %s: fan-out never completed; re-run as %s", post_id, job_id)
    return 1


async def _rerun_job(redis: ArqRedis, job: Job, settings: Settings) -> int:
    """An event's job that is neither done nor alive: run it again as `<id>:r<attempt>`."""
    ttl = marks.ttl_seconds(settings)
    attempt = await marks.next_attempt(redis, event_tracking.state_key(job.job_id), ttl=ttl)
    job_id = event_tracking.rerun_id(job.job_id, attempt)
    if attempt > settings.reconcile_max_attempts:
        await marks.mark(redis, event_tracking.state_key(job.job_id), marks.GAVE_UP, ttl=ttl)
        await dead_letters.record(
            redis,
            dead_letters.DeadLetter(
                job_id=job_id,
                function=job.function,
                args=list(job.args),
                lane=job.lane,
                error=f"{job.job_id} not done after {attempt - 1} reconciler re-runs",
                tries=attempt - 1,
            ),
        )
        JOBS_DEAD_LETTERED.labels(job.function).inc()
        log.error("%s never completed; dead letter %s", job.job_id, job_id)
        return 0
    await redis.enqueue_job(job.function, *job.args, _job_id=job_id, _queue_name=job.lane)
    log.warning("%s never completed; re-run as %s", job.job_id, job_id)
    return 1
