"""Two regions on loopback (issue 37, decision 0087), started once for tests/regions:

- each region its own PostgreSQL (the embedded wheel's server, `wal_level = logical`: the
  first initdb'd and migrated, the second a copy of its data directory made while it was
  stopped, so one initdb and one migration serve both), numbered and linked by
  `app.db.regions` (publications with row filters, `origin = none` subscriptions both ways);
- each region its own Redis (tests.cluster_topology.plain_redis: every role on it);
- each region its own API process (REGION, REGION_NUMBER, REGION_PEERS naming the other's
  URL), an ARQ worker per lane and the outbox relay, all real processes.

`start_regions` starts it; `Region` is what a test talks to.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
from redis.asyncio import Redis

from app.db import regions
from devtools import provision
from devtools.replica import SETTINGS, ReplicaPair, _free_port
from tests import servers
from tests.cluster.scaled import Process
from tests.cluster_topology import plain_redis
from tests.helpers import eventually, run_module
from tests.servers import ApiServer

DATABASE = "regional"
# One worker a region (the default lane): BIG_AUTHOR_FOLLOWERS is raised so that no job of
# these few-follower tests goes to the big lane (the other tests cover lanes).
LANES = ("jobs.worker.WorkerSettings",)
PG_SETTINGS = {
    **SETTINGS,
    "wal_level": "logical",
    "max_connections": "80",
    "max_replication_slots": "8",
    "max_wal_senders": "8",
    # A subscription's apply worker that failed (a conflict) starts again in 1 s, not 5.
    "wal_retrieve_retry_interval": "1s",
}
WAIT = 30.0
START_SECONDS = 90.0
# A peer's posts are served while its heartbeat (every HEARTBEAT_MS) is younger than this.
CONFIRM_MS = 2500
HEARTBEAT_MS = 250
# The line each process logs once it serves (arq's banner, the relay's start).
READY = {"arq": "Starting worker", "jobs.relay": "outbox relay running"}
# Variables of the test session that name other servers or roles: not a region's.
DROPPED = ("DATABASE_REPLICA_URL", "DATABASE_REPLICA_URLS")
ROLES = ("TIMELINES", "SESSIONS", "QUEUE", "PUBSUB", "LIMITS")


@dataclass
class Region:
    name: str
    number: int
    database: ReplicaPair  # its "primary" only: the region's own server
    redis: Redis
    api: ApiServer
    processes: list[Process]

    @property
    def dsn(self) -> str:
        return self.database.url("primary", DATABASE)

    def http(self) -> httpx.AsyncClient:
        return self.api.http()

    async def sql(self, query: str, *args: object) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.dsn)
        try:
            return list(await conn.fetch(query, *args))
        finally:
            await conn.close()

    def logs(self) -> str:
        parts = [p.tail() for p in self.processes]
        parts.append(f"== api {self.name}\n{self.api.logs()}")
        log = self.database.root / "primary.log"
        if log.exists():
            parts.append(f"== postgres {self.name}\n{log.read_text(errors='replace')[-4000:]}")
        return "\n".join(parts)


def _server(root: Path, bindir: Path, user: str | None) -> ReplicaPair:
    return ReplicaPair(bindir, root, user, {"primary": _free_port()}, dict(PG_SETTINGS))


@asynccontextmanager
async def two_databases() -> AsyncIterator[tuple[ReplicaPair, ReplicaPair]]:
    """Two logical-replication-ready servers with the migrated schema in DATABASE."""
    bindir = provision._pg_bindir()
    user = provision._pg_system_user()
    root = Path(tempfile.mkdtemp(prefix="hf-regions-"))
    if user is not None:
        uid, gid = provision._uid_gid(user)
        os.chown(root, uid, gid)
        provision._allow_traversal(root, bindir)
    a, b = _server(root / "a", bindir, user), _server(root / "b", bindir, user)
    started: list[ReplicaPair] = []
    try:
        for server in (a, b):
            server.root.mkdir()
            if user is not None:
                os.chown(server.root, uid, gid)
        a.run(
            "initdb", "-D", str(a.primary_data), "-U", "postgres", "--auth=trust",
            "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        a.start("primary")
        started.append(a)
        await a.create_database(DATABASE)
        code, _, err = await run_module(
            "alembic", "upgrade", "head", env={"DATABASE_URL": a.url("primary", DATABASE)}
        )
        assert code == 0, err
        a.stop("primary")
        started.remove(a)
        await asyncio.to_thread(shutil.copytree, a.primary_data, b.primary_data, symlinks=True)
        if user is not None:
            for path in [b.primary_data, *b.primary_data.rglob("*")]:
                os.chown(path, uid, gid, follow_symlinks=False)
        (b.primary_data / "postmaster.pid").unlink(missing_ok=True)
        for server in (a, b):
            server.start("primary")
            started.append(server)
        yield a, b
    finally:
        for server in started:
            with contextlib.suppress(RuntimeError):
                server.stop("primary", "immediate")
        shutil.rmtree(root, ignore_errors=True)


def _region_env(name: str, number: int, dsn: str, redis_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    for role in ROLES:
        env.pop(f"REDIS_{role}_URL", None)
    env.update(
        {
            "DATABASE_URL": dsn,
            "REDIS_URL": redis_url,
            "REGION": name,
            "REGION_NUMBER": str(number),
            # Retried jobs come back quickly (a fault test's lost Redis, a lagging region).
            "JOB_RETRY_BASE_SECONDS": "0.3",
            "JOB_RETRY_MAX_SECONDS": "2",
            "BIG_AUTHOR_FOLLOWERS": "100000",
            "REGION_HEARTBEAT_MS": str(HEARTBEAT_MS),
        }
    )
    return env


@asynccontextmanager
async def start_regions() -> AsyncIterator[tuple[Region, Region]]:
    """Regions a (number 1) and b (number 2), linked both ways; stopped whatever happens."""
    async with AsyncExitStack() as stack:
        pa, pb = await stack.enter_async_context(two_databases())
        ra = await stack.enter_async_context(plain_redis())
        rb = await stack.enter_async_context(plain_redis())
        made: list[Region] = []
        for name, number, pair, redis in (("a", 1, pa, ra), ("b", 2, pb, rb)):
            kwargs = redis.connection_pool.connection_kwargs
            env = _region_env(
                name,
                number,
                pair.url("primary", DATABASE),
                f"redis://{kwargs['host']}:{kwargs['port']}/0",
            )
            api = ApiServer(env=env, args=["--timeout-graceful-shutdown", "2"])
            made.append(Region(name, number, pair, redis, api, []))
        a, b = made
        for me, peer in ((a, b), (b, a)):
            me.api.env["REGION_PEERS"] = f"{peer.name}:{peer.number}:{peer.api.url}/graphql"
            conn = await asyncpg.connect(me.dsn)
            try:
                await regions.setup(conn, me.name, me.number, CONFIRM_MS)
            finally:
                await conn.close()
        for me, peer in ((a, b), (b, a)):
            conn = await asyncpg.connect(me.dsn)
            try:
                await regions.link(conn, me.name, peer.name, peer.dsn)
            finally:
                await conn.close()
        for region in made:
            env = region.api.env
            region.processes = [Process(["arq", lane], env) for lane in LANES]
            region.processes.append(Process(["jobs.relay"], env))
        try:
            # Four API, worker and relay processes import at once on a shared machine: the
            # API processes first, with a longer start budget than a lone server's.
            budget, servers.START_SECONDS = servers.START_SECONDS, START_SECONDS
            try:
                await asyncio.gather(*(r.api.start() for r in made))
            finally:
                servers.START_SECONDS = budget
            for region in made:
                for proc in region.processes:
                    proc.start()
            await eventually(lambda: _subscriptions_running(made), WAIT, 0.1, "subscriptions")
            # Workers and relays ready (their first lines), so the first test's events are
            # not timed through their start-up.
            for region in made:
                for proc in region.processes:
                    marker = READY[proc.argv[0]]
                    await eventually(
                        lambda p=proc, m=marker: m in p.log.read_text(errors="replace"),  # type: ignore[misc]
                        WAIT,
                        0.1,
                        f"{' '.join(proc.argv)} in region {region.name} ready",
                    )
            yield a, b
        finally:
            for region in made:
                for child in [p.proc for p in region.processes] + [region.api.proc]:
                    if child is not None and child.poll() is None:
                        child.terminate()
            for region in made:
                for proc in region.processes:
                    proc.stop()
                region.api.stop()


async def _subscriptions_running(made: list[Region]) -> bool:
    for region in made:
        conn = await asyncpg.connect(region.dsn)
        try:
            rows = await regions.status(conn)
        finally:
            await conn.close()
        if len(rows) != 2 or not all(row["running"] for row in rows):
            return False
    return True
