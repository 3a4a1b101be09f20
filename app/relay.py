"""Outbox relay: committed events -> ARQ jobs, at least once.

Rows are claimed with FOR UPDATE SKIP LOCKED, so several relays can run side by side, and
marked published in the same transaction after their jobs are enqueued. A crash between the
two re-publishes the batch: job ids derive from the event id, so ARQ drops the duplicates
(and every job is idempotent anyway). Wakes on NOTIFY outbox, polls as a fallback.

"Enqueued" means "held by a replica of the queue" when a fence is given (decision 0091): a
job the queue's master took but had not replicated dies with it, so the batch is marked
only once the fence confirms it (WAIT), else the pass fails and the next one enqueues the
batch again on whichever master then serves.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.fanout import lanes
from app.fanout.lanes import Enqueue
from app.outbox import events
from app.redis_client import QueueFence

log = logging.getLogger("app.relay")

_CLAIM = text(
    """
    SELECT id, event_type, payload FROM outbox
    WHERE published_at IS NULL ORDER BY id LIMIT :n FOR UPDATE SKIP LOCKED
    """
)
_MARK = text("UPDATE outbox SET published_at = now() WHERE id = ANY(:ids)")
_PRUNE = text("DELETE FROM outbox WHERE published_at < now() - make_interval(hours => :hours)")
_OLDEST_AGE = text(
    "SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM outbox "
    "WHERE published_at IS NULL"
)


_PUBLISHED_EVENTS = text(
    """
    SELECT id, event_type, payload FROM outbox
    WHERE published_at IS NOT NULL AND id > :after
      AND published_at < now() - make_interval(secs => :grace)
      AND published_at > now() - make_interval(secs => :window)
    ORDER BY id LIMIT :n
    """
)


@dataclass(frozen=True)
class Published:
    event_id: int
    event_type: str
    payload: dict[str, Any]


async def published_events(
    engine: AsyncEngine, grace_seconds: float, window_seconds: float, after: int, limit: int
) -> list[Published]:
    """Events relayed between `window` and `grace` seconds ago, above event id `after`, in
    id order: what the reconciler checks (jobs.reconcile)."""
    params = {
        "grace": grace_seconds,
        "window": window_seconds,
        "after": after,
        "n": limit,
    }
    async with engine.connect() as conn:
        rows = await conn.execute(_PUBLISHED_EVENTS, params)
        return [Published(r.id, r.event_type, r.payload) for r in rows]


async def oldest_unpublished_seconds(engine: AsyncEngine) -> float:
    """Age of the oldest event not relayed yet (0 when none): the relay's lag, for /metrics."""
    async with engine.connect() as conn:
        return float((await conn.execute(_OLDEST_AGE)).scalar_one())


@dataclass(frozen=True)
class Job:
    function: str
    args: tuple[int | str, ...]
    job_id: str
    lane: str = lanes.DEFAULT


def widening_job_id(post_id: int, version: int) -> str:
    """The fan-out of a post widened at `version` (also its batches' prefix): one per
    (post, version), whichever event asks for it (decision 0067)."""
    return f"fw:{post_id}:{version}"


def jobs_for(event_id: int, event_type: str, payload: dict[str, Any]) -> list[Job]:
    """What each event asks the workers to do. Deletes never fan out (tombstones)."""
    key = f"evt:{event_id}"
    if event_type == events.POST_CREATED:
        version = payload.get("widening")
        if version is not None:  # a widening: the post's split again, per (post, version)
            job_id = widening_job_id(payload["post_id"], version)
            return [Job(lanes.FANOUT_POST, (payload["post_id"], job_id, version), job_id)]
        return [Job(lanes.FANOUT_POST, (payload["post_id"],), key)]
    if event_type in (
        events.POST_EDITED,
        events.POST_DELETED,
        events.POST_VISIBILITY_CHANGED,
        events.POST_RESTRICTED,
    ):
        return [Job(lanes.POST_CHANGED, (payload["post_id"],), key)]
    if event_type == events.FOLLOWED:
        return [Job(lanes.BACKFILL_FOLLOW, (payload["follower_id"], payload["followee_id"]), key)]
    if event_type == events.UNFOLLOWED:
        return [Job(lanes.CLEANUP_AUTHOR, (payload["follower_id"], payload["followee_id"]), key)]
    if event_type == events.BLOCKED:
        a, b = payload["blocker_id"], payload["blocked_id"]
        return [
            Job(lanes.CLEANUP_AUTHOR, (a, b), f"{key}:a"),
            Job(lanes.CLEANUP_AUTHOR, (b, a), f"{key}:b"),
        ]
    log.warning("outbox event %s has unknown type %r; skipped", event_id, event_type)
    return []


class OutboxRelay:
    def __init__(
        self,
        engine: AsyncEngine,
        enqueue: Enqueue,
        batch_size: int = 500,
        fence: QueueFence | None = None,
    ) -> None:
        self.engine = engine
        self.enqueue = enqueue
        self.batch_size = batch_size
        self.fence = fence  # None: enqueued is safe (tests' recorders, no replicas)

    async def publish_pending(self) -> int:
        """Publish one batch; returns how many events it handled. Raises (the batch stays
        unpublished) when the fence cannot confirm its jobs survive a failover."""
        async with self.engine.begin() as conn:
            rows = (await conn.execute(_CLAIM, {"n": self.batch_size})).all()
            if not rows:
                return 0
            epoch = await self.fence.begin() if self.fence is not None else None
            for row in rows:
                for job in jobs_for(row.id, row.event_type, row.payload):
                    await self.enqueue(job.function, *job.args, job_id=job.job_id, lane=job.lane)
            if self.fence is not None and epoch is not None:
                await self.fence.confirm(epoch)
            await conn.execute(_MARK, {"ids": [r.id for r in rows]})
        return len(rows)

    async def drain(self) -> int:
        total = 0
        while (n := await self.publish_pending()) > 0:
            total += n
        return total

    async def prune(self, keep_hours: int = 24) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(_PRUNE, {"hours": keep_hours})

    async def run(self, dsn: str, stop: asyncio.Event, poll_seconds: float = 1.0) -> None:
        """Publish until `stop` is set, waking on NOTIFY and at least every poll_seconds."""
        wake = asyncio.Event()
        listener = await asyncpg.connect(dsn)
        await listener.add_listener("outbox", lambda *_: wake.set())
        loops = 0
        try:
            while not stop.is_set():
                wake.clear()
                try:
                    await self.drain()
                except Exception:  # keep relaying after a transient DB/Redis failure
                    log.exception("relay pass failed; retrying")
                    await asyncio.sleep(poll_seconds)
                loops += 1
                if loops % 3600 == 0:
                    await self.prune()
                waiters = [asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stop.wait())]
                await asyncio.wait(waiters, timeout=poll_seconds, return_when="FIRST_COMPLETED")
                for waiter in waiters:
                    waiter.cancel()
        finally:
            await listener.close()
