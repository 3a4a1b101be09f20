"""Retries with exponential backoff, then dead letters: the wrapper around every task.

ARQ on its own retries only cancelled jobs and an explicit `arq.Retry`; any other error
fails the job for good, and its stored failed result blocks the same job id for an hour.
Here every error (a failover, a timeout, a bug) raises `Retry(defer=...)` until the job has
had JOB_MAX_TRIES tries; the last failure records a dead letter (jobs.dead_letters) and is
re-raised, so ARQ stores it as failed and nothing is silently final.

The task's own deadline (JOB_TIMEOUT_SECONDS) is applied here, inside the wrapper, so a hung
dependency is retried too; ARQ's job_timeout sits a little above it as a backstop, and ARQ's
max_tries a few tries above ours so that workers killed mid-job (which ARQ counts as tries)
still leave the wrapper a final run to record the dead letter.

ARQ's last try (`max_tries`) is the one that may end without us: a worker killed or stopped
during it (ARQ cancels running jobs on SIGTERM) leaves the job to ARQ, which then fails it
without calling the task ("max retries exceeded"). So that try records the job's dead letter
*before* running and withdraws it once the job succeeds: what ARQ gives up on is listed.

On a queue whose master Sentinels fail over (decision 0091) a job notes the master before it
runs and checks it after: a job whose connections moved to the promoted replica mid-way may
have queued follow-up jobs (batches, their tracking) on the dead master that died with it,
so it fails and is retried whole (jobs are idempotent) instead of succeeding without them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from arq import Retry

from app.fanout import lanes
from app.observability.metrics import JOB_RETRIES, JOBS_DEAD_LETTERED
from app.redis_client import QueueFence, QueueNotReplicated
from jobs import constants, dead_letters, faults

log = logging.getLogger("jobs.reliability")

Task = Callable[..., Awaitable[Any]]


def backoff_seconds(job_try: int, base: float, cap: float) -> float:
    """base * 2^(try-1), capped, with +-20 % jitter so a failover's victims spread out."""
    delay = min(cap, base * 2.0 ** (job_try - 1))
    return delay * random.uniform(0.8, 1.2)


def reliable(name: str, task: Task) -> Task:
    """`task` retried with backoff up to JOB_MAX_TRIES tries, then a dead letter."""

    @functools.wraps(task)
    async def run(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        settings = ctx["state"].settings
        job_try = int(ctx.get("job_try", 1))

        def letter(error: str) -> dead_letters.DeadLetter:
            return dead_letters.DeadLetter(
                job_id=str(ctx.get("job_id", "")),
                function=name,
                args=list(args),
                kwargs=kwargs,
                lane=str(ctx.get("lane", lanes.DEFAULT)),
                error=error,
                tries=job_try,
            )

        last_try = job_try >= arq_max_tries(settings.job_max_tries)
        if last_try:  # ARQ runs it no more if this try ends without an outcome
            await dead_letters.record(
                ctx["redis"], letter(f"worker lost during ARQ's last try ({job_try})")
            )
        fence: QueueFence | None = ctx.get("queue_fence")
        try:
            async with asyncio.timeout(settings.job_timeout_seconds):
                master = await fence.master_id() if fence is not None else ""
                if ctx["state"].faults.job_fault_hook:  # test-only (app.config.FaultSwitches)
                    await faults.check(ctx["redis"], name)
                result = await task(ctx, *args, **kwargs)
                if fence is not None and await fence.master_id() != master:
                    raise QueueNotReplicated("the queue's master changed during the job")
        except Retry:
            raise
        except Exception as exc:
            if job_try < settings.job_max_tries:
                JOB_RETRIES.labels(name).inc()
                defer = backoff_seconds(
                    job_try, settings.job_retry_base_seconds, settings.job_retry_max_seconds
                )
                log.warning("%s try %d failed (%r); again in %.2f s", name, job_try, exc, defer)
                raise Retry(defer=defer) from exc
            dead = letter(f"{type(exc).__name__}: {exc}")
            await dead_letters.record(ctx["redis"], dead)
            JOBS_DEAD_LETTERED.labels(name).inc()
            log.error("%s failed %d tries; dead letter %s", name, job_try, dead.job_id)
            raise
        if last_try:
            await dead_letters.forget(ctx["redis"], str(ctx.get("job_id", "")))
        return result

    return run


def arq_max_tries(job_max_tries: int) -> int:
    """ARQ's `max_tries` for our JOB_MAX_TRIES (jobs.worker sets it)."""
    return job_max_tries + constants.ARQ_EXTRA_TRIES
