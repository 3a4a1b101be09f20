"""A real ARQ worker process SIGKILLed in the middle of a large fan-out, then restarted:
every timeline converges to holding the post exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

from app.auth.tokens import issue_token
from app.config import PROJECT_ROOT
from app.fanout import lanes
from app.timelines.store import timeline_key
from tests.conftest import TEST_DATABASE_URL
from tests.graphql_client import gql

FOLLOWERS = 20_000
WORKER_ENV = {
    "FANOUT_BATCH_SIZE": "20",  # 1,000 batches: slow enough to kill mid-way
    "FANOUT_PULL_THRESHOLD": "1000000",
    "FANOUT_PUSH_THRESHOLD": "900000",
    "BIG_AUTHOR_FOLLOWERS": "1000000",  # everything on the default lane, one worker
    "JOB_TIMEOUT_SECONDS": "2",  # the killed worker's job is retried 12 s later
}


async def _seed_followers(state) -> tuple[int, list[int]]:
    conn = await asyncpg.connect(TEST_DATABASE_URL)
    try:
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
    finally:
        await conn.close()
    for start in range(0, FOLLOWERS, 1000):
        await asyncio.gather(
            *(state.timelines.rebuild(f, []) for f in followers[start : start + 1000])
        )
    return author, followers


async def _holding(state, followers: list[int], post_id: int) -> int:
    member = str(post_id)
    async with state.redis.pipeline(transaction=False) as pipe:
        for f in followers:
            pipe.zscore(timeline_key(f), member)
        return sum(1 for s in await pipe.execute() if s is not None)


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
    created = (await gql(client, "CreatePost", {"body": "to 20k"}, token=token)).ok()
    post_id = int(created["createPost"]["id"])
    await pipeline.relay.drain()

    worker = _start_worker()
    try:
        deadline = time.monotonic() + 60
        held = 0
        while time.monotonic() < deadline:
            held = await _holding(state, followers, post_id)
            if held > 0:
                break
            await asyncio.sleep(0.02)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
        at_kill = await _holding(state, followers, post_id)
        assert 0 < at_kill < FOLLOWERS, at_kill  # killed in the middle
        assert await state.redis.zcard(lanes.DEFAULT) > 0  # work was left behind

        worker = _start_worker()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            held = await _holding(state, followers, post_id)
            if held == FOLLOWERS:
                break
            await asyncio.sleep(0.5)
        assert held == FOLLOWERS
        counts = set()
        async with state.redis.pipeline(transaction=False) as pipe:
            for f in followers:
                pipe.zcount(timeline_key(f), "(0", "+inf")
            counts = set(await pipe.execute())
        assert counts == {1}  # exactly once everywhere
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()
