"""The queue's master killed under posts (issue 38, decision 0091): the queue role on a
master, its replica and three Sentinels (tests/sentinel_topology.py), named by
REDIS_QUEUE_URL=redis+sentinel://...; the API, an ARQ worker per lane and the outbox relay as
real processes on it, under a supervisor that would start an exited one again as `make
run`'s launcher does (ARQ's own connection ends a worker at a failover; the workers' own
connection, jobs.connections.worker_pool, rides it out, so none may need it); every other
role on the test Redis.

Three authors post in turn to four followers while the master is SIGKILLed. What must hold:
the Sentinels promote the replica with nobody acting; fan-out resumes (a post acknowledged
after the kill reaches a follower's timeline) within RESUME_WITHIN seconds of the kill; and
every post acknowledged to its author, before, during or after the failover, ends up in every
follower's timeline and feed (read through GraphQL). The gap is printed (docs/DEPLOYMENT.md,
decision 0091).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import PROJECT_ROOT
from app.state import AppState
from tests.helpers import eventually, follow, gql, ids, make_user
from tests.sentinel_topology import SentinelTopology
from tests.servers import ApiServer, stop_process
from tests.timelines.local_cluster import redis_server_binary

pytestmark = [
    pytest.mark.skipif(redis_server_binary() is None, reason="no redis-server binary"),
    # Timing under a killed master: beside the parallel phase's load fan-out twice did not
    # resume within WAIT in clean-clone runs (cause not found); alone it passes.
    pytest.mark.alone,
]

LANES = ("jobs.worker.WorkerSettings", "jobs.worker.BigLaneWorkerSettings")
RESUME_WITHIN = 10.0  # issue 38's target: fan-out resumes within 10 s without an operator
WAIT = 30.0  # work done by other processes on a loaded 2-core machine
RESTART_DELAY = 1.0  # the launcher's first restart delay (devtools/launcher.py, _Restarts)
POST_EVERY = 0.1  # s between two posts (three authors in turn)
ENV = {
    # The feed shows what fan-out wrote, never recent posts read from PostgreSQL because the
    # queue lags (what this test must not mistake for delivery).
    "LAG_THRESHOLD_SECONDS": "86400",
    # Jobs failed by the failover come back within a second or two (tests/cluster/scaled.py).
    "JOB_RETRY_BASE_SECONDS": "0.3",
    "JOB_RETRY_MAX_SECONDS": "3",
    "JOB_MAX_TRIES": "20",
}


@dataclass
class Supervised:
    """A `python -m ...` child started again RESTART_DELAY after it exits."""

    argv: list[str]
    env: dict[str, str]
    log: Path = field(default_factory=lambda: Path(tempfile.mkstemp(suffix=".log")[1]))
    proc: subprocess.Popen[bytes] | None = None
    exits: list[float] = field(default_factory=list)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *self.argv],
                cwd=PROJECT_ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    async def supervise(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if self.proc is not None and self.proc.poll() is not None:
                self.exits.append(time.monotonic())
                await asyncio.sleep(RESTART_DELAY)
                self.start()
            await asyncio.sleep(0.05)

    def tail(self) -> str:
        return f"== {' '.join(self.argv)}\n" + self.log.read_text(errors="replace")[-2500:]


@dataclass
class Load:
    """Posts acknowledged (id, monotonic time of the answer), refusals, and when each post
    was first seen in the watched follower's timeline."""

    acked: list[tuple[int, float]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    seen: dict[int, float] = field(default_factory=dict)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def write_loop(load: Load, http: httpx.AsyncClient, tokens: list[str]) -> None:
    n = 0
    while not load.stop.is_set():
        result = await gql(http, "CreatePost", {"body": f"post {n}"}, token=tokens[n % 3])
        if result.status == 200 and not result.errors and result.data:
            load.acked.append((int(result.data["createPost"]["id"]), time.monotonic()))
        else:
            load.refused.append(f"{result.status} {result.codes}")
        n += 1
        await asyncio.sleep(POST_EVERY)


async def watch(load: Load, state: AppState, user_id: int) -> None:
    """When each post first reached `user_id`'s timeline (what fan-out writes)."""
    while not load.stop.is_set():
        now = time.monotonic()
        for post_id, _ in await state.timelines.latest(user_id, 400):
            load.seen.setdefault(post_id, now)
        await asyncio.sleep(0.02)


async def scroll(http: httpx.AsyncClient, token: str) -> list[int]:
    """Every post id of the viewer's CHRONOLOGICAL feed, page after page."""
    shown: list[int] = []
    after: str | None = None
    for _ in range(50):
        variables: dict[str, Any] = {"first": 50, "mode": "CHRONOLOGICAL", "after": after}
        feed = (await gql(http, "Feed", variables, token=token)).ok()["feed"]
        assert feed["degraded"] is False, feed
        shown += ids(feed)
        if not feed["pageInfo"]["hasNextPage"]:
            return shown
        after = feed["pageInfo"]["endCursor"]
    raise AssertionError("the feed did not end within 50 pages")


async def test_queue_master_killed_under_posts_loses_nothing(state: AppState) -> None:
    async with SentinelTopology() as queue:
        env = {**os.environ, "REDIS_QUEUE_URL": queue.url, **ENV}
        children = [Supervised(["arq", lane], env) for lane in LANES]
        children.append(Supervised(["jobs.relay"], env))
        stop_supervising = asyncio.Event()
        try:
            for child in children:  # starting side by side with the API
                child.start()
            async with ApiServer(env=env) as api, api.http() as http:
                supervisors = [asyncio.create_task(c.supervise(stop_supervising)) for c in children]
                await run_failover(queue, api, http, state, children)
                stop_supervising.set()
                await asyncio.gather(*supervisors)
        finally:
            stop_supervising.set()
            for child in children:
                if child.proc is not None:
                    stop_process(child.proc)


async def run_failover(
    queue: SentinelTopology,
    api: ApiServer,
    http: httpx.AsyncClient,
    state: AppState,
    children: list[Supervised],
) -> None:
    def logs() -> str:
        return "\n".join([c.tail() for c in children] + [f"== api\n{api.logs()}"])

    authors = [(await make_user(http, f"author{i}"))[0] for i in range(3)]
    fans = [await make_user(http, f"fan{i}") for i in range(4)]
    for token, _ in fans:
        for i in range(3):
            await follow(http, token, f"author{i}")
        (await gql(http, "Feed", {"first": 5}, token=token)).ok()  # active: its timeline exists
    load = Load()
    watcher = asyncio.create_task(watch(load, state, fans[0][1]))
    writer = asyncio.create_task(write_loop(load, http, authors))
    try:
        # The pipeline works through the Sentinels' master before anything is killed.
        await eventually(lambda: len(load.seen) >= 5, WAIT, 0.05, f"posts delivered\n{logs()}")
        killed_at = time.monotonic()
        await queue.kill_master()
        failover = await queue.await_failover(WAIT)

        def resumed() -> float | None:
            after = [load.seen.get(pid) for pid, at in load.acked if at > killed_at]
            times = [t for t in after if t is not None]
            return min(times) if times else None

        resumed_at = await eventually(resumed, WAIT, 0.05, f"fan-out resumed\n{logs()}")
        gap = resumed_at - killed_at
        # The load goes on a little past the recovery, then stops.
        await asyncio.sleep(2.0)
    finally:
        load.stop.set()
        await asyncio.gather(writer, watcher)

    acked = {pid for pid, _ in load.acked}
    during = [pid for pid, at in load.acked if killed_at < at < killed_at + failover]
    restarts = {" ".join(c.argv): len(c.exits) for c in children}
    report = (
        f"failover {failover:.2f} s; fan-out resumed {gap:.2f} s after the kill; acked "
        f"{len(acked)} ({len(during)} while the Sentinels failed over); refused "
        f"{load.refused}; restarts {restarts}"
    )
    print(report)

    # Every acknowledged post in every follower's timeline and feed (through GraphQL), once:
    # jobs run again after the failover add nothing twice.
    async def delivered() -> bool:
        for token, user_id in fans:
            timeline = [pid for pid, _ in await state.timelines.latest(user_id, 400)]
            feed = await scroll(http, token)
            assert len(set(timeline)) == len(timeline) and len(set(feed)) == len(feed), report
            if not acked <= set(timeline) or not acked <= set(feed):
                return False
        return True

    await eventually(delivered, WAIT, 0.5, f"every acked post delivered; {report}\n{logs()}")
    converged = time.monotonic() - killed_at
    print(f"every acknowledged post in every feed {converged:.2f} s after the kill")
    assert not load.refused, report  # the API never depends on the queue's Redis
    assert gap <= RESUME_WITHIN, report
    assert not any(restarts.values()), report  # the failover was ridden out, not restarted
