"""A real ARQ worker process sent SIGTERM while it polls its queue exits, every time (jobs.sigterm,
decision 0093): on Python 3.11 ARQ's one cancel could be dropped inside redis-py's
`wait_for` and the worker polled on for ever."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import PROJECT_ROOT
from app.fanout import lanes
from tests.helpers import eventually

LANES = {
    "jobs.worker.WorkerSettings": lanes.DEFAULT,
    "jobs.worker.BigLaneWorkerSettings": lanes.BIG,
}
EXIT_SECONDS = 10.0


@pytest.mark.parametrize("attempt", range(12))
async def test_a_polling_worker_exits_on_sigterm(state, attempt: int) -> None:
    settings_path = list(LANES)[attempt % 2]
    health_key = LANES[settings_path] + ":health-check"
    await state.redis.delete(health_key)
    worker = subprocess.Popen(  # noqa: ASYNC220 - started once, waited for by polling
        [str(Path(sys.executable).parent / "arq"), settings_path],
        cwd=PROJECT_ROOT,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Polling: ARQ writes its health-check key on its first poll.
        await eventually(lambda: state.redis.exists(health_key), 60, 0.05, "the worker polls")
        await asyncio.sleep(0.02 * attempt)  # lands the signal at other points of the loop
        worker.send_signal(signal.SIGTERM)
        await eventually(lambda: worker.poll() is not None, EXIT_SECONDS, 0.05, "the exit")
        assert worker.returncode == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
