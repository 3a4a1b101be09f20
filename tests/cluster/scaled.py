"""The scale-out topology of issue 23 and the steps its tests share (tests/cluster):

- a Redis Cluster of 3 masters with a replica each (tests/cluster_topology.py) holding the
  timelines, sessions, pub/sub and limits roles (`redis+cluster://`);
- the queue role (ARQ) on a plain server of its own (ARQ needs a plain server; its own, so
  these workers never take a job of the other tests, which share the test Redis db);
- PostgreSQL as a primary and a streaming standby (devtools/replica.py's pair, the tests'
  schema migrated on the primary): DATABASE_URL the primary, DATABASE_REPLICA_URL the
  standby, the router's production defaults (fan-out's follower paging on the replica, 5 s
  lag bound, checked every 1 s); feed pages filtered on the replica behind the narrowing
  watermarks on the first API process (the default, decision 0086), on the primary on the
  second (DATABASE_REPLICA_FEED_PAGES=0), so the feed tests page through both variants;
- two API processes (tests.servers.ApiServer, separate ports), two ARQ workers per lane and
  the outbox relay, all real processes with those role URLs, sharing a
  PROMETHEUS_MULTIPROC_DIR as under `make run` (an API's /metrics counts the workers' too).

`start_scaled` starts it (the session fixture `scaled`, tests/cluster/conftest.py);
`scroll`, `timeline`, `on_cluster`, `active_follower` and `replica_reads` are the tests' steps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster

from app.config import PROJECT_ROOT
from app.db.watermarks import EPOCH_KEY
from app.timelines.store import TimelineStore, timeline_key
from devtools.replica import ReplicaPair, replica_pair
from tests.cluster_topology import ClusterTopology, plain_redis
from tests.conftest import TABLES
from tests.helpers import eventually, gql, ids, make_user, run_module
from tests.servers import ApiServer, stop_process

ROLES_ON_CLUSTER = ("TIMELINES", "SESSIONS", "PUBSUB", "LIMITS")
WORKERS_PER_LANE = 2
LANES = ("jobs.worker.WorkerSettings", "jobs.worker.BigLaneWorkerSettings")
DATABASE = "scaled"
# 2 API processes x (10 + 10 overflow) + 5 worker/relay processes x (5 + 5), on each server.
PG_MAX_CONNECTIONS = "150"


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
    queue: Redis  # the plain server of the queue role (ARQ)
    apis: list[ApiServer]
    workers: list[Process]
    relay: Process
    env: dict[str, str]
    database: ReplicaPair  # the primary (DATABASE_URL) and its standby (DATABASE_REPLICA_URL)

    async def truncate(self) -> None:
        """Empty tables on the primary (the standby replays it). Ids go on where they were:
        the API processes live across tests with their in-process caches (an author's
        pulled posts, contexts, sessions), keyed by ids that a restarted sequence would hand
        to other users (the next test's PULL author then read the last one's cached posts)."""
        conn = await asyncpg.connect(self.database.url("primary", DATABASE))
        try:
            await conn.execute(f"TRUNCATE {TABLES} CASCADE")
        finally:
            await conn.close()

    async def trust_marks(self) -> None:
        """A flushed role warms its watermarks up for one mark TTL (30 s) before a replica
        may answer a page (decision 0086: marks may have been lost). Flushed together with
        the truncated tables, none were: as a test's `Watermarks.clear` says too."""
        marks = self.client()
        try:
            await marks.set(EPOCH_KEY, "1")
        finally:
            await marks.aclose()

    def client(self) -> RedisCluster:
        """A cluster client in the test process, to look behind the API (keys, slots)."""
        nodes = [ClusterNode("127.0.0.1", n.port) for n in self.cluster.nodes if n.alive()]
        return RedisCluster(startup_nodes=nodes, decode_responses=False)

    def logs(self) -> str:
        parts = [p.tail() for p in (*self.workers, self.relay)]
        parts += [f"== api {api.port}\n{api.logs()}" for api in self.apis]
        return "\n".join(parts)

    def dead(self) -> list[str]:
        """The processes that died (empty when all run)."""
        dead = [" ".join(p.argv) for p in (*self.workers, self.relay) if not p.alive()]
        dead += [f"api {a.port}" for a in self.apis if a.proc is None or a.proc.poll() is not None]
        return dead


def role_env(cluster_url: str, queue_url: str) -> dict[str, str]:
    """Every role but the queue on the cluster; the queue on a plain server."""
    env = {f"REDIS_{role}_URL": cluster_url for role in ROLES_ON_CLUSTER}
    env["REDIS_QUEUE_URL"] = queue_url
    return env


def database_env(pair: ReplicaPair, metrics_dir: str) -> dict[str, str]:
    """The primary and its standby; the replica router at its defaults."""
    return {
        "DATABASE_URL": pair.url("primary", DATABASE),
        "DATABASE_REPLICA_URL": pair.url("standby", DATABASE),
        "PROMETHEUS_MULTIPROC_DIR": metrics_dir,
    }


@asynccontextmanager
async def replicated_database() -> AsyncIterator[ReplicaPair]:
    """devtools/replica.py's pair with the tests' schema migrated on the primary (as
    tests/conftest.py migrates the tests' database) and replayed on the standby."""
    async with replica_pair(max_connections=PG_MAX_CONNECTIONS) as pair:
        await pair.create_database(DATABASE)
        migrate = {"DATABASE_URL": pair.url("primary", DATABASE)}
        code, _, err = await run_module("alembic", "upgrade", "head", env=migrate)
        assert code == 0, err
        await eventually(pair.caught_up, WAIT, 0.05, "the standby replayed the migrations")
        yield pair


@asynccontextmanager
async def start_scaled() -> AsyncIterator[Scaled]:
    """The whole topology, started and (whatever happens) stopped."""
    async with (
        replicated_database() as pair,
        ClusterTopology(masters=3) as cluster,
        plain_redis() as queue,
    ):
        # Jobs failed by a failover come back within a second or two, not 1, 2, 4... s, and
        # keep coming back (20 tries, ~50 s) until the promoted master has a replica again.
        quick_retries = {
            "JOB_RETRY_BASE_SECONDS": "0.3",
            "JOB_RETRY_MAX_SECONDS": "3",
            "JOB_MAX_TRIES": "20",
        }
        # What docs/DEPLOYMENT.md recommends on a cluster with replicas: a fan-out batch's
        # timeline writes confirmed by a replica of each master (decision 0068).
        durable = {"TIMELINE_WAIT_REPLICAS": "1", "TIMELINE_WAIT_MS": "500"}
        kwargs = queue.connection_pool.connection_kwargs
        queue_url = f"redis://{kwargs['host']}:{kwargs['port']}/0"
        metrics_dir = tempfile.mkdtemp(prefix="hf-scaled-metrics-")
        env = {
            **os.environ,
            **role_env(cluster.url, queue_url),
            **database_env(pair, metrics_dir),
            **quick_retries,
            **durable,
        }
        # A socket left open by a failed test must not hold the teardown for long. The first
        # API process filters feed pages on the replica (the default, decision 0086), the
        # second on the primary: the scrolls alternate between both variants.
        apis = [
            ApiServer(env=env | extra, args=["--timeout-graceful-shutdown", "2"])
            for extra in ({}, {"DATABASE_REPLICA_FEED_PAGES": "0"})
        ]
        workers = [Process(["arq", lane], env) for lane in LANES for _ in range(WORKERS_PER_LANE)]
        relay = Process(["jobs.relay"], env)
        try:
            for api in apis:
                await api.start()
            for proc in (*workers, relay):
                proc.start()
            yield Scaled(cluster, queue, apis, workers, relay, env, pair)
        finally:
            # SIGTERM to all first, then wait for each: the processes stop side by side.
            for child in [p.proc for p in (*workers, relay)] + [a.proc for a in apis]:
                if child is not None and child.poll() is None:
                    child.terminate()
            for proc in (*workers, relay):
                proc.stop()
            for api in apis:
                api.stop()
            shutil.rmtree(metrics_dir, ignore_errors=True)


# -- steps -----------------------------------------------------------------------------------

WAIT = 30.0  # seconds for work done by other processes on a loaded 2-core machine


async def scroll(
    clients: list[httpx.AsyncClient], token: str, mode: str, first: int = 5
) -> list[int]:
    """Every post id of the viewer's feed, page after page, each page through the next
    client in turn (the cursor of one API process followed on the other)."""
    shown: list[int] = []
    after: str | None = None
    for page in range(100):
        variables: dict[str, Any] = {"first": first, "mode": mode, "after": after}
        http = clients[page % len(clients)]
        feed = (await gql(http, "Feed", variables, token=token)).ok()["feed"]
        assert feed["degraded"] is False, feed
        shown += ids(feed)
        if not feed["pageInfo"]["hasNextPage"]:
            return shown
        after = feed["pageInfo"]["endCursor"]
    raise AssertionError("the feed did not end within 100 pages")


async def on_cluster(scaled: Scaled, key: str) -> bool:
    """Whether `key` (built by its owner's function) exists on the cluster."""
    client = scaled.client()
    try:
        return bool(await client.exists(key))
    finally:
        await client.aclose()


async def timeline(scaled: Scaled, user_id: int) -> list[int]:
    """The user's home timeline as it sits on the cluster, newest first ([] when missing)."""
    client = scaled.client()
    try:
        return [pid for pid, _ in await TimelineStore(client, 1000, 100).latest(user_id, 1000)]
    finally:
        await client.aclose()


async def active_follower(http: httpx.AsyncClient, scaled: Scaled, handle: str) -> tuple[str, int]:
    """A user who has read the feed once: its timeline exists on the cluster (fan-out writes
    only existing timelines) and it counts as active."""
    token, user_id = await make_user(http, handle)
    (await gql(http, "Feed", {"first": 5}, token=token)).ok()

    async def exists() -> bool:
        return await on_cluster(scaled, timeline_key(user_id))

    await eventually(exists, WAIT, 0.05, f"{handle}'s timeline on the cluster")
    return token, user_id


async def replica_reads(api: ApiServer) -> dict[tuple[str, str], float]:
    """`feed_db_replica_reads_total` by (use, served), every process of the topology summed
    (the API's /metrics reads the shared PROMETHEUS_MULTIPROC_DIR): where the reads that may
    go to the replica ran."""
    async with api.http() as http:
        text = (await http.get("/metrics")).text
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "feed_db_replica_reads_total":
                key = (sample.labels["use"], sample.labels["served"])
                found[key] = found.get(key, 0.0) + sample.value
    return found
