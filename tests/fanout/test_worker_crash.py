"""A real ARQ worker process SIGKILLed in the middle of a large fan-out, then restarted:
every timeline converges to holding the post exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from app.auth.tokens import issue_token
from app.config import PROJECT_ROOT
from app.fanout import lanes
from tests.helpers import db, eventually, post

FOLLOWERS = 20_000
WORKER_ENV = {
    "FANOUT_BATCH_SIZE": "20",  # 1,000 batches: slow enough to kill mid-way
    "FANOUT_PULL_THRESHOLD": "1000000",
    "FANOUT_PUSH_THRESHOLD": "900000",
    "BIG_AUTHOR_FOLLOWERS": "1000000",  # everything on the default lane, one worker
    "JOB_TIMEOUT_SECONDS": "2",  # the killed worker's job is retried 12 s later
}


async def _seed_followers(state) -> tuple[int, list[int]]:
    async with db() as conn:
        author = await conn.fetchval(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at, "
            "follower_count) VALUES ('author', 'x', 'Author', now(), $1) RETURNING id",
            FOLLOWERS,
        )
        ids = await conn.fetch(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at, "
            "following_count) SELECT 'f' || g, 'x', 'F', now(), 1 "
            "FROM generate_series(1, $1) g RETURNING id",
            FOLLOWERS,
        )
        followers = [r["id"] for r in ids]
        await conn.copy_records_to_table(
            "follows",
            records=[(f, author) for f in followers],
            columns=["follower_id", "followee_id"],
        )
    # 200 at a time: each in flight holds a pooled connection, and a thousand connects at
    # once timed out on a loaded machine.
    for start in range(0, FOLLOWERS, 200):
        await asyncio.gather(
            *(state.timelines.rebuild(f, []) for f in followers[start : start + 200])
        )
    return author, followers


async def _holding(state, followers: list[int], post_id: int) -> int:
    # Through the store: one pipeline.
    found = await state.timelines.latest_many(followers, state.settings.timeline_max)
    return sum(1 for rows in found.values() if any(p == post_id for p, _ in rows))


def _start_worker() -> subprocess.Popen[bytes]:
    arq = Path(sys.executable).parent / "arq"
    return subprocess.Popen(
        [str(arq), "jobs.worker.WorkerSettings"],
        cwd=PROJECT_ROOT,
        env={**os.environ, **WORKER_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_sigkill_mid_fan_out_converges(client, state, pipeline) -> None:
    author, followers = await _seed_followers(state)
    token = issue_token(state.settings, author)
    post_id = await post(client, token, "to 20k")
    await pipeline.relay.drain()

    async def held() -> int:
        return await _holding(state, followers, post_id)

    async def converged() -> bool:
        return await held() == FOLLOWERS

    async def begun() -> bool:
        # The first page's followers only: reading all 20,000 timelines takes long enough
        # (on a loaded machine) for the whole fan-out to finish before the kill.
        return await _holding(state, followers[:20], post_id) > 0

    worker = _start_worker()
    try:
        await eventually(begun, within=60, what="the worker reached a timeline")
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        at_kill = await held()
        assert 0 < at_kill < FOLLOWERS, at_kill  # killed in the middle
        assert await state.redis.zcard(lanes.DEFAULT) > 0  # work was left behind

        worker = _start_worker()
        await eventually(converged, within=90, interval=0.5, what="every timeline holds it")
        found = await state.timelines.latest_many(followers, state.settings.timeline_max)
        assert {len(rows) for rows in found.values()} == {1}  # exactly once everywhere
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()
