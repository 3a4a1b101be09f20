"""Completion of the outbox events' own jobs (follow backfills, unfollow/block cleanups, post
changes), so the reconciler can tell a job that ran from one that vanished.

A post's fan-out is a tree of jobs and has its own marks (jobs.tracking); every other event
job is one job (a block: two), tracked by the id the relay gave it (`evt:<event>[:a|:b]`, its
*root*). `ej:<root>` holds `done` (ms, written when the job or one of its re-runs succeeded),
`attempts` (the reconciler's re-runs, `<root>:r<n>`) and `gave_up` (ms). A missing mark means
"not done": a Redis that lost its data makes the reconciler re-run the window's event jobs,
which are idempotent, rather than forget them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from arq.constants import in_progress_key_prefix, job_key_prefix
from redis.asyncio import Redis

from jobs.marks import ATTEMPTS, DONE, mark, ttl_seconds

_RERUN = re.compile(r"^(?P<root>.+):r(?P<attempt>\d+)$")

Task = Callable[..., Awaitable[Any]]


def state_key(root: str) -> str:
    """hash: `done` (ms), `attempts` (reconciler re-runs), `gave_up` (ms)."""
    return f"ej:{root}"


def rerun_id(root: str, attempt: int) -> str:
    return f"{root}:r{attempt}"


def root_of(job_id: str) -> str:
    """The relay's job id a job stands for: its own, or the one it re-runs."""
    match = _RERUN.match(job_id)
    return match.group("root") if match else job_id


def settling(task: Task) -> Task:
    """`task` that marks its root done when it succeeds (an event job's last step)."""

    @functools.wraps(task)
    async def run(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        result = await task(ctx, *args, **kwargs)
        ttl = ttl_seconds(ctx["state"].settings)
        await mark(ctx["redis"], state_key(root_of(str(ctx["job_id"]))), DONE, ttl=ttl)
        return result

    return run


async def alive(redis: Redis, roots: Sequence[str]) -> list[bool]:
    """Per root: is the job, or a re-run of it, queued, waiting for a retry or running? ARQ
    keeps a job's key until it finishes (an expired key means ARQ will drop it unrun). Two
    round trips, however many roots."""
    async with redis.pipeline(transaction=False) as pipe:
        for root in roots:
            pipe.hget(state_key(root), ATTEMPTS)
        tried = await pipe.execute()
    async with redis.pipeline(transaction=False) as pipe:
        for root, n in zip(roots, tried, strict=True):
            ids = [root, *(rerun_id(root, i) for i in range(1, int(n or 0) + 1))]
            pipe.exists(
                *(job_key_prefix + i for i in ids), *(in_progress_key_prefix + i for i in ids)
            )
        return [int(found) > 0 for found in await pipe.execute()]
