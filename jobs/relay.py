"""Outbox relay process: `python -m jobs.relay`. Stops cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

from app.config import get_settings
from app.db import regions
from app.db.engine import make_engine
from app.relay import OutboxRelay
from jobs.connections import arq_pool, queue_fence


async def main() -> None:
    settings = get_settings()
    engine = make_engine(settings, pool_size=2)
    arq = await arq_pool(settings)  # jobs wait up to JOB_EXPIRES_SECONDS in the queue

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        await arq.enqueue_job(function, *args, _job_id=job_id, _queue_name=lane)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # Events are marked relayed once a replica of the queue holds their jobs (decision 0091).
    relay = OutboxRelay(engine, enqueue, fence=queue_fence(settings, arq))
    logging.getLogger("app.relay").info("outbox relay running")
    beats = None
    if settings.region_number:  # several regions: this one's heartbeat (decision 0087)
        interval = settings.region_heartbeat_ms / 1000
        beats = asyncio.create_task(regions.heartbeats(settings.plain_database_url, interval, stop))
    try:
        await relay.run(settings.plain_database_url, stop)
    finally:
        if beats is not None:
            beats.cancel()
        await arq.aclose()
        await engine.dispose()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(main())
