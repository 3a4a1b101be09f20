"""The real service on scratch servers: a private redis-server, a scratch (or kept) database on
DATABASE_URL's server, the processes `make run` starts (devtools.launcher.PROCESSES: API,
relay, one ARQ worker per lane) and the feed benchmark's stock server (naive join, bare
endpoint). Workers are restarted per strategy (their FANOUT_* settings differ); the API, the
relay and the stock server stay up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
from redis.asyncio import Redis

from app.auth.tokens import issue_token
from app.config import PROJECT_ROOT, Settings, asyncpg_url
from app.operation_documents import operations
from benchmarks.common import (
    Postgres,
    cpu_seconds,
    free_port,
    process_tree,
    start_redis,
    start_server,
)
from devtools.launcher import PROCESSES
from devtools.provision import create_database, drop_database, migrate

SECRET = "report-benchmark-secret-key-that-is-long-enough-for-hs256"
SPECS = {spec.name: spec for spec in PROCESSES}
WORKER_SPECS = ("worker", "worker-big")
REUSED_PREFIX = "bench_report_"


def base_env() -> dict[str, str]:
    """What every process of the run gets, whatever the strategy."""
    return {
        "SECRET_KEY": SECRET,
        "PROBE_ENABLED": "0",
        "RATE_LIMIT_WRITES_PER_MINUTE": "100000000",
        "RATE_LIMIT_READS_PER_MINUTE": "0",
        "RATE_LIMIT_READS_PER_IP_PER_MINUTE": "0",
        "REALTIME_SOCKETS_PER_IP": "0",
        "REALTIME_SUBSCRIPTIONS_PER_IP": "0",
        "REALTIME_SUBSCRIBES_PER_IP_PER_MINUTE": "0",
        "MAX_CONNECTIONS_PER_CLIENT": "0",
        "TIMELINE_MAX": "800",
        "FANOUT_BATCH_SIZE": "1000",
    }


@dataclass
class System:
    """The servers and processes of one run; `close()` stops and removes what it made."""

    database: str  # the database's name
    keep_database: bool
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="bench_report_")))
    redis_proc: subprocess.Popen[bytes] | None = None
    redis_url: str = ""
    base_db: str = ""
    dsn: str = ""
    port: int = 0
    stock_port: int = 0
    procs: dict[str, list[subprocess.Popen[bytes]]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    redis: Redis | None = None
    created_database: bool = False

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def stock(self) -> str:
        return f"http://127.0.0.1:{self.stock_port}"

    async def open(self) -> None:
        port = free_port()
        self.redis_proc = start_redis(port, self.workdir, self.workdir / "redis.log")
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        self.base_db = asyncpg_url(
            os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
        )
        admin = await asyncpg.connect(self.base_db)
        try:
            there = await admin.fetchval(
                "SELECT 1 FROM pg_database WHERE datname = $1", self.database
            )
        finally:
            await admin.close()
        if there:
            host = self.base_db.rsplit("/", 1)[0]
            self.dsn = f"{host}/{self.database}"
        else:
            self.dsn = create_database(self.base_db, self.database)
            self.created_database = True
        migrate(self.dsn)
        self.redis = Redis.from_url(self.redis_url)
        deadline = time.monotonic() + 10
        while True:
            try:
                await self.redis.ping()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        self.port, self.stock_port = free_port(), free_port()
        self.env = {
            **os.environ,
            **base_env(),
            "DATABASE_URL": self.dsn,
            "REDIS_URL": self.redis_url,
            "REALTIME_NAMESPACE": self.database,
            "PROMETHEUS_MULTIPROC_DIR": str(self.workdir / "metrics"),
        }
        (self.workdir / "metrics").mkdir(exist_ok=True)

    def start(self, name: str, env: dict[str, str] | None = None, copies: int = 1) -> None:
        """Start `copies` of a launcher process (api, relay, worker, worker-big) or `stock`."""
        full = {**self.env, **(env or {})}
        started = self.procs.setdefault(name, [])
        for i in range(copies):
            log = self.workdir / f"{name}-{len(started) + i}.log"
            if name == "stock":
                proc = start_server("benchmarks.stock_server:app", full, self.stock_port, 1, log)
            else:
                with log.open("ab") as out:
                    proc = subprocess.Popen(
                        SPECS[name].command(self.port),
                        cwd=PROJECT_ROOT,
                        env=full,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
            started.append(proc)

    def stop(self, *names: str) -> None:
        victims = [p for n in names for p in self.procs.pop(n, [])]
        for proc in victims:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in victims:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def dead(self) -> list[str]:
        return [n for n, ps in self.procs.items() for p in ps if p.poll() is not None]

    def pids(self, *names: str) -> list[int]:
        return [pid for n in names for p in self.procs.get(n, []) for pid in process_tree(p.pid)]

    def cpu(self, *names: str) -> float:
        return cpu_seconds(self.pids(*names))

    def redis_cpu(self) -> float:
        return cpu_seconds([self.redis_proc.pid]) if self.redis_proc else 0.0

    def tracebacks(self) -> int:
        return sum(
            log.read_text(errors="replace").count("Traceback") for log in self.workdir.glob("*.log")
        )

    async def wait_http(self, base: str, seconds: float = 90) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=2) as client:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                if self.dead():
                    raise RuntimeError(f"exited: {self.dead()} (logs in {self.workdir})")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/healthz")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise RuntimeError(f"{base} not healthy after {seconds} s (logs in {self.workdir})")

    def postgres(self, admin: asyncpg.Connection) -> Postgres:
        return Postgres(admin, self.database)

    async def close(self, keep_logs: bool = False) -> None:
        self.stop(*list(self.procs))
        if self.redis is not None:
            await self.redis.aclose()
        if self.redis_proc is not None:
            self.redis_proc.terminate()
            self.redis_proc.wait()
        if self.created_database and not self.keep_database:
            drop_database(self.base_db, self.database)
        if not keep_logs:
            shutil.rmtree(self.workdir, ignore_errors=True)


def scratch_name(scale: str, reuse: bool) -> str:
    """A kept network has a stable name per scale; otherwise a fresh one."""
    return f"{REUSED_PREFIX}{scale}" if reuse else f"{REUSED_PREFIX}{scale}_{uuid.uuid4().hex[:6]}"


class Client:
    """GraphQL over HTTP with the project's own documents (graphql/operations)."""

    def __init__(self, base: str) -> None:
        self.docs = operations()
        self.settings = Settings(secret_key=SECRET)  # type: ignore[call-arg]
        self.http = httpx.AsyncClient(
            base_url=base, timeout=60, limits=httpx.Limits(max_connections=64)
        )
        self._tokens: dict[int, str] = {}
        self.overloaded = 0

    def token(self, user_id: int) -> str:
        if user_id not in self._tokens:
            self._tokens[user_id] = issue_token(self.settings, user_id)
        return self._tokens[user_id]

    async def call(
        self, user_id: int, op: str, variables: dict[str, Any], query: str | None = None
    ) -> dict[str, Any]:
        body = {"query": query or self.docs[op], "variables": variables, "operationName": op}
        for attempt in range(50):
            reply = await self.http.post(
                "/graphql",
                content=orjson.dumps(body),
                headers={
                    "Authorization": f"Bearer {self.token(user_id)}",
                    "Content-Type": "application/json",
                },
            )
            answer = reply.json()
            # Admission control answers 503 OVERLOADED past MAX_IN_FLIGHT: retried as a client
            # would (counted; the post's clock keeps running from the first send).
            if reply.status_code != 503:
                break
            self.overloaded += 1
            await asyncio.sleep(0.02 * (attempt + 1))
        if reply.status_code != 200 or answer.get("errors"):
            raise RuntimeError(f"{op} for {user_id}: HTTP {reply.status_code} {answer}")
        return dict(answer["data"])

    async def aclose(self) -> None:
        await self.http.aclose()
