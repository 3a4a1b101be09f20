"""The scale-out topology of issue 23, started once for tests/cluster on loopback:

- a Redis Cluster of 3 masters with a replica each (tests/cluster_topology.py) holding the
  timelines, sessions, pub/sub and limits roles (`redis+cluster://`);
- the queue role (ARQ) on the plain test Redis db (ARQ needs a plain server);
- two API processes (tests.servers.ApiServer, separate ports), two ARQ workers per lane and
  the outbox relay, all real processes with those role URLs.

The failover tests (test_failover.py, collected after test_e2e.py) kill a master: they leave
the cluster with a promoted replica, which the tests after them accept.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from redis.asyncio.cluster import ClusterNode, RedisCluster

from app.config import PROJECT_ROOT
from tests.cluster_topology import ClusterTopology
from tests.conftest import TEST_REDIS_URL
from tests.servers import ApiServer, stop_process

ROLES_ON_CLUSTER = ("TIMELINES", "SESSIONS", "PUBSUB", "LIMITS")
WORKERS_PER_LANE = 2
LANES = ("jobs.worker.WorkerSettings", "jobs.worker.BigLaneWorkerSettings")


@dataclass
class Process:
    """A `python -m ...` child with its output in a log file (quoted when a test fails)."""

    argv: list[str]
    env: dict[str, str]
    log: Path = field(default_factory=lambda: Path(tempfile.mkstemp(suffix=".log")[1]))
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *self.argv],
                cwd=PROJECT_ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def tail(self) -> str:
        return f"== {' '.join(self.argv)}\n" + self.log.read_text(errors="replace")[-3000:]


@dataclass
class Scaled:
    """What the tests talk to: the cluster, both API processes, the workers and the relay."""

    cluster: ClusterTopology
    apis: list[ApiServer]
    workers: list[Process]
    relay: Process
    env: dict[str, str]

    def client(self) -> RedisCluster:
        """A cluster client in the test process, to look behind the API (keys, slots)."""
        nodes = [ClusterNode("127.0.0.1", n.port) for n in self.cluster.nodes if n.alive()]
        return RedisCluster(startup_nodes=nodes, decode_responses=False)

    def logs(self) -> str:
        parts = [p.tail() for p in (*self.workers, self.relay)]
        parts += [f"== api {api.port}\n{api.logs()}" for api in self.apis]
        return "\n".join(parts)

    def all_alive(self) -> list[str]:
        """The processes that died (empty when all run)."""
        dead = [" ".join(p.argv) for p in (*self.workers, self.relay) if not p.alive()]
        dead += [f"api {a.port}" for a in self.apis if a.proc is None or a.proc.poll() is not None]
        return dead


def role_env(cluster_url: str) -> dict[str, str]:
    """Every role but the queue on the cluster; the queue on the plain test Redis."""
    env = {f"REDIS_{role}_URL": cluster_url for role in ROLES_ON_CLUSTER}
    env["REDIS_QUEUE_URL"] = TEST_REDIS_URL
    return env


@pytest.fixture(scope="session")
async def scaled(test_database: str) -> AsyncIterator[Scaled]:
    async with ClusterTopology(masters=3) as cluster:
        # Jobs failed by a failover come back within a second or two, not 1, 2, 4... s.
        quick_retries = {"JOB_RETRY_BASE_SECONDS": "0.3", "JOB_RETRY_MAX_SECONDS": "3"}
        env = {**os.environ, **role_env(cluster.url), **quick_retries}
        apis = [ApiServer(env=env) for _ in range(2)]
        workers = [Process(["arq", lane], env) for lane in LANES for _ in range(WORKERS_PER_LANE)]
        relay = Process(["jobs.relay"], env)
        try:
            for api in apis:
                await api.start()
            for proc in (*workers, relay):
                proc.start()
            yield Scaled(cluster, apis, workers, relay, env)
        finally:
            # SIGTERM to all first, then wait for each: the processes stop side by side.
            for child in [p.proc for p in (*workers, relay)] + [a.proc for a in apis]:
                if child is not None and child.poll() is None:
                    child.terminate()
            for proc in (*workers, relay):
                proc.stop()
            for api in apis:
                api.stop()


@pytest.fixture(autouse=True)
async def empty_cluster(scaled: Scaled) -> None:
    """Every test starts from an empty cluster (the session's `clean` empties the rest)."""
    await scaled.cluster.flush()
