"""Drive the real write path in-process: the outbox relay and ARQ workers in burst mode."""

from __future__ import annotations

from typing import Any

from arq import create_pool
from arq.connections import ArqRedis
from arq.worker import Worker

from app.fanout import lanes
from app.relay import OutboxRelay
from app.state import AppState
from jobs.connections import redis_settings
from jobs.worker import lane_settings


class _NoCronWorker(Worker):
    """A lane's worker whose crons never fire on their own: a burst crossing :00 would run
    the reconciler (:30 the pruner) as extra jobs. Their functions stay registered: tests
    enqueue the periodic passes by name."""

    async def run_cron(self, *args: Any, **kwargs: Any) -> None:
        return None


class Pipeline:
    def __init__(self, state: AppState, arq: ArqRedis) -> None:
        self.state = state
        self.arq = arq
        self.relay = OutboxRelay(state.engine, self.enqueue)

    @classmethod
    async def open(cls, state: AppState) -> Pipeline:
        return cls(state, await create_pool(redis_settings(state.settings)))

    async def close(self) -> None:
        await self.arq.aclose()

    async def enqueue(self, function: str, *args: Any, job_id: str, lane: str) -> None:
        await self.arq.enqueue_job(function, *args, _job_id=job_id, _queue_name=lane)

    async def run_lane(self, lane: str) -> int:
        """Run one real ARQ worker on a lane until its queue is empty; jobs completed."""
        settings = {**lane_settings(lane, max_jobs=20), "poll_delay": 0.01}
        worker = _NoCronWorker(**settings, burst=True, handle_signals=False)
        try:
            await worker.main()
        finally:
            await worker.close()
        return worker.jobs_complete + worker.jobs_failed + worker.jobs_retried

    async def settle(self, max_rounds: int = 20) -> None:
        """Relay and work until nothing is left anywhere."""
        for _ in range(max_rounds):
            published = await self.relay.drain()
            ran = await self.run_lane(lanes.DEFAULT) + await self.run_lane(lanes.BIG)
            if published == 0 and ran == 0:
                return
        raise AssertionError("write path did not settle")
