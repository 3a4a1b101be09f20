"""Feed read path over GraphQL HTTP: the real `feed` next to the naive join and the in-memory
ceiling, measured in the same run (issue 4, "Must show" and "Targets").

    python -m benchmarks.feed_read [--users 100000 --avg-following 50 --posts 2000000]
        [--clients 1,10,50] [--seconds 15] [--workers 1|2] [--reuse-db NAME] [--keep]

What it does, in order:
1. Database: a scratch database on DATABASE_URL's server (default the local postgres),
   migrated and filled by devtools.seed's seed_bulk (100k users, a Zipf follower graph of ~5M
   follows, 2M posts: ~1.5-2 min). `--reuse-db NAME` seeds NAME only if it is empty and
   never drops it, so later runs skip the seeding; `--keep` keeps a scratch database.
2. Redis: REDIS_URL's server, db `--redis-db` (default 12), FLUSHED before and after. Timelines
   therefore start cold, as after a deploy with an empty cache.
3. Servers: `uvicorn app.web:app` (uvloop + httptools, `--workers N`) on a free port, and the
   baselines' own small app, `uvicorn benchmarks.stock_server:app` (same options, same
   database and SECRET_KEY), on another: naiveFeed and memoryFeed are not part of the service.
4. Viewers: `--viewers` random active users (following >= 1), and every user following
   1,000-2,000 accounts ("heavy"; 12 in the default data set). Tokens from
   app.auth.tokens.issue_token with the SECRET_KEY handed to the server.
5. Warm-up (not measured): one CHRONOLOGICAL read per viewer, whose missing timeline is served
   from Postgres (degraded) while it is rebuilt in the background; then waits until every
   viewer's timeline exists in Redis; then one request of every variant per viewer.
6. Load: for each viewer class, each --clients value and each variant, a closed loop of N
   clients for --seconds (asyncio; each client one httpx keep-alive connection, opened by an
   unmeasured request first); every request goes to a random viewer of the class. Variants, all with graphql/operations/feed.graphql's
   `Feed` selection set (edges { cursor node { ...PostFields } } pageInfo sessionId degraded):
     ranked  feed(first: 20) RANKED first page (ranks up to FEED_SESSION_SIZE, new session)
     chrono  feed(first: 20, mode: CHRONOLOGICAL) first page
     next    feed(first: 20, after: <endCursor of a RANKED first page>): a page of a session
     naive   naiveFeed(first: 20): follows JOIN posts ORDER BY created_at DESC LIMIT 20
             (stock server)
     memory  memoryFeed(first: 20): the same page from memory (no I/O), stock Strawberry
             with parser and validation caches: GraphQL's ceiling (stock server)
7. Prints markdown tables (requests/s, p50, p99, errors, degraded answers, CPU ms/request of
   the server processes and of this load generator) and the issue's target ratios.

All processes share the machine's cores: quote ratios from one run, not absolute figures
across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import secrets
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
from redis.asyncio import Redis

from app.auth.tokens import issue_token
from app.config import Settings, asyncpg_url
from app.operation_documents import operations
from benchmarks.common import (
    base_database_url,
    base_redis_url,
    cpu_seconds,
    free_port,
    percentile,
    process_tree,
    release_database,
    scratch_redis_url,
    seeded_parser,
    start_server,
    stop_processes,
    variant_document,
    wait_for_timelines,
    with_redis_db,
)
from devtools.provision import create_database, migrate
from devtools.seed import seed_bulk

VARIANTS = ("ranked", "chrono", "next", "naive", "memory")
API_APP = "app.web:app"
STOCK_APP = "benchmarks.stock_server:app"  # naiveFeed and memoryFeed
LABELS = {
    "ranked": "feed RANKED, first page",
    "chrono": "feed CHRONOLOGICAL, first page",
    "next": "feed RANKED, next page (cursor)",
    "naive": "naiveFeed (follows JOIN posts)",
    "memory": "memoryFeed (in-memory ceiling)",
}
CLASSES = ("random", "heavy")
CLASS_LABELS = {"random": "random active viewers", "heavy": "heavy viewers (1,000-2,000 followees)"}
PAGE = 20


# -- documents ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    key: str
    server: str  # API_APP or STOCK_APP
    document: str
    operation: str
    top: str  # the response's top-level field
    path: str = "/graphql"

    def body(self, after: str | None = None) -> bytes:
        variables: dict[str, Any] = {"first": PAGE}
        if self.key in ("ranked", "next"):
            variables["mode"] = "RANKED"
        elif self.key == "chrono":
            variables["mode"] = "CHRONOLOGICAL"
        if after is not None:
            variables["after"] = after
        return orjson.dumps(
            {"query": self.document, "operationName": self.operation, "variables": variables}
        )


def variants() -> dict[str, Variant]:
    feed = operations()["Feed"]
    return {
        "ranked": Variant("ranked", API_APP, feed, "Feed", "feed"),
        "chrono": Variant("chrono", API_APP, feed, "Feed", "feed"),
        "next": Variant("next", API_APP, feed, "Feed", "feed"),
        "naive": Variant(
            "naive", STOCK_APP, variant_document("naiveFeed"), "NaiveFeed", "naiveFeed"
        ),
        "memory": Variant(
            "memory", STOCK_APP, variant_document("memoryFeed"), "MemoryFeed", "memoryFeed"
        ),
    }


# -- infrastructure ----------------------------------------------------------------------


async def database_ready(dsn: str) -> bool:
    """True when the database exists, is migrated and already holds users."""
    try:
        conn = await asyncpg.connect(asyncpg_url(dsn))
    except asyncpg.InvalidCatalogNameError:
        return False
    try:
        has_table = await conn.fetchval("SELECT to_regclass('public.users') IS NOT NULL")
        return bool(has_table and await conn.fetchval("SELECT EXISTS (SELECT 1 FROM users)"))
    finally:
        await conn.close()


async def ensure_seeded(
    dsn: str, name: str, users: int, avg_following: float, posts: int, seed: int
) -> None:
    """The benchmark database migrated to head (one seeded by an older checkout lacks newer
    columns) and seeded by devtools.seed's seed_bulk unless it already holds users."""
    migrate(dsn)
    if await database_ready(dsn):
        print(f"database {name}: already seeded, reused", flush=True)
        return
    started = time.perf_counter()
    print(f"database {name}: seeding (devtools.seed bulk) ...", flush=True)
    await seed_bulk(asyncpg_url(dsn), users, avg_following, posts, seed=seed, progress=False)
    print(f"seeded in {time.perf_counter() - started:.0f} s", flush=True)


async def data_set(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(asyncpg_url(dsn))
    try:
        return {
            t: int(await conn.fetchval(f"SELECT count(*) FROM {t}"))
            for t in ("users", "follows", "posts")
        }
    finally:
        await conn.close()


async def pick_viewers(dsn: str, n: int, seed: int, active_days: int) -> dict[str, list[int]]:
    conn = await asyncpg.connect(asyncpg_url(dsn))
    try:
        active = [
            r[0]
            for r in await conn.fetch(
                "SELECT id FROM users WHERE following_count >= 1 "
                "AND last_active_at >= now() - make_interval(days => $1) ORDER BY id",
                active_days,
            )
        ]
        heavy = [
            r[0]
            for r in await conn.fetch(
                "SELECT id FROM users WHERE following_count BETWEEN 1000 AND 2000 ORDER BY id"
            )
        ]
    finally:
        await conn.close()
    rng = random.Random(seed)
    return {"random": rng.sample(active, min(n, len(active))), "heavy": heavy}


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


async def wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    async with httpx.AsyncClient(base_url=base) as client:
        for _ in range(300):
            if proc.poll() is not None:
                raise RuntimeError(f"server exited:\n{_tail(log)}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get("/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"server not ready after 30 s:\n{_tail(log)}")


# -- load --------------------------------------------------------------------------------


@dataclass
class Result:
    requests: int = 0
    errors: int = 0
    degraded: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    first_error: str | None = None

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def pct(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000

    def cpu_ms(self, seconds: float) -> float:
        return seconds * 1000 / self.requests if self.requests else float("nan")


def check(reply: httpx.Response, top: str) -> tuple[bool, bool, str | None]:
    """(ok, degraded, error text) for one response."""
    if reply.status_code != 200:
        return False, False, f"HTTP {reply.status_code}: {reply.text[:200]}"
    payload = orjson.loads(reply.content)
    if payload.get("errors"):
        return False, False, str(payload["errors"][0])[:300]
    data = payload["data"][top]
    if not data["edges"]:
        return False, False, "empty page"
    return True, bool(data["degraded"]), None


async def closed_loop(
    base: str,
    variant: Variant,
    requests: Sequence[tuple[dict[str, str], bytes]],
    clients: int,
    seconds: float,
    server_pids: Sequence[int],
    seed: int,
) -> Result:
    """`clients` concurrent loops, each sending its next request as soon as one returns.

    Each loop is one user with its own keep-alive connection (its own httpx client): one
    client shared by 50 loops queues requests in httpcore's pool and costs the load
    generator ~2x the CPU per request, on the cores the server needs. Connections are opened
    by one unmeasured request each, before the clock starts.
    """
    result = Result()
    deadline = 0.0
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    users = [httpx.AsyncClient(base_url=base, limits=limits, timeout=120) for _ in range(clients)]

    async def one_client(n: int, client: httpx.AsyncClient) -> None:
        rng = random.Random(seed * 1000 + n)
        while time.perf_counter() < deadline:
            headers, body = rng.choice(requests)
            start = time.perf_counter()
            try:
                reply = await client.post(variant.path, content=body, headers=headers)
            except httpx.HTTPError as exc:  # a dropped connection is an error, not the end
                ok, degraded, error = False, False, f"{type(exc).__name__}: {exc}"
            else:
                ok, degraded, error = check(reply, variant.top)
            elapsed = time.perf_counter() - start
            result.latencies.append(elapsed)
            result.requests += 1
            result.degraded += degraded
            if not ok:
                result.errors += 1
                result.first_error = result.first_error or error

    try:
        headers, body = requests[0]
        await asyncio.gather(*(u.post(variant.path, content=body, headers=headers) for u in users))
        server0, client0 = cpu_seconds(server_pids), time.process_time()
        start = time.perf_counter()
        deadline = start + seconds
        await asyncio.gather(*(one_client(n, u) for n, u in enumerate(users)))
        result.seconds = time.perf_counter() - start
        result.server_cpu = cpu_seconds(server_pids) - server0
        result.client_cpu = time.process_time() - client0
    finally:
        await asyncio.gather(*(u.aclose() for u in users))
    return result


async def each(
    base: str,
    variant: Variant,
    requests: Sequence[tuple[dict[str, str], bytes]],
    concurrency: int,
) -> list[httpx.Response]:
    """Every request once, `concurrency` at a time (warm-up and cursor collection), on fresh
    connections: pooled ones left idle past the server's keep-alive timeout get closed."""
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=120) as client:

        async def one(headers: dict[str, str], body: bytes) -> httpx.Response:
            async with gate:
                return await client.post(variant.path, content=body, headers=headers)

        return await asyncio.gather(*(one(h, b) for h, b in requests))


# -- report ------------------------------------------------------------------------------


def table(results: dict[tuple[str, str, int], Result], cls: str, clients: Sequence[int]) -> str:
    lines = [
        f"**{CLASS_LABELS[cls]}**",
        "",
        "| variant | clients | req/s | p50 ms | p99 ms | x memoryFeed req/s "
        "| server CPU ms/req | client CPU ms/req | errors | degraded |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in clients:
        memory = results.get((cls, "memory", n))
        for key in VARIANTS:
            r = results.get((cls, key, n))
            if r is None:
                continue
            ratio = f"{r.rate / memory.rate:.2f}" if memory and memory.rate else "-"
            lines.append(
                f"| {LABELS[key]} | {n} | {r.rate:,.0f} | {r.pct(0.5):.1f} | {r.pct(0.99):.1f} "
                f"| {ratio} | {r.cpu_ms(r.server_cpu):.2f} | {r.cpu_ms(r.client_cpu):.2f} "
                f"| {r.errors} | {r.degraded} |"
            )
    return "\n".join(lines)


def targets(results: dict[tuple[str, str, int], Result], clients: Sequence[int]) -> str:
    top = max(clients)
    lines = [
        "| target | measured | met |",
        "|---|---:|:-:|",
    ]
    for cls in CLASSES:
        memory = results.get((cls, "memory", top))
        for key in ("ranked", "chrono", "next"):
            r = results.get((cls, key, top))
            if r is None or memory is None or not memory.rate:
                continue
            ratio = r.rate / memory.rate
            lines.append(
                f"| {LABELS[key]} req/s / memoryFeed req/s, {cls}, {top} clients >= 0.8 "
                f"| {ratio:.2f} | {'yes' if ratio >= 0.8 else 'no'} |"
            )
    for cls in CLASSES:
        for key in ("ranked", "chrono", "next"):
            r = results.get((cls, key, top))
            if r is None:
                continue
            p99 = r.pct(0.99)
            lines.append(
                f"| {LABELS[key]} p99, {cls}, {top} clients <= 200 ms | {p99:.0f} ms "
                f"| {'yes' if p99 <= 200 else 'no'} |"
            )
    naive = results.get(("heavy", "naive", top))
    for key in ("ranked", "chrono", "next"):
        r = results.get(("heavy", key, top))
        if naive is None or r is None:
            continue
        ratio = naive.pct(0.99) / r.pct(0.99)
        lines.append(
            f"| naiveFeed p99 / {LABELS[key]} p99, heavy, {top} clients >= 5x "
            f"| {ratio:.1f}x | {'yes' if ratio >= 5 else 'no'} |"
        )
    return "\n".join(lines)


# -- main --------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> None:
    base_db = base_database_url()
    redis_url = scratch_redis_url(with_redis_db(base_redis_url(), args.redis_db))
    clients = [int(c) for c in args.clients.split(",")]
    chosen = [v for v in args.variants.split(",") if v]
    classes = [c for c in args.classes.split(",") if c]
    name = args.reuse_db or f"bench_feed_{uuid.uuid4().hex[:6]}"
    dsn = create_database(base_db, name)
    owned = args.reuse_db is None and not args.keep
    redis = Redis.from_url(redis_url)
    servers: dict[str, subprocess.Popen[bytes]] = {}
    log = Path(tempfile.gettempdir()) / f"feed_read_{name}.log"
    try:
        await ensure_seeded(dsn, name, args.users, args.avg_following, args.posts, args.seed)
        counts = await data_set(dsn)
        await redis.flushdb()

        secret = secrets.token_urlsafe(48)
        settings = Settings(secret_key=secret)
        env = {**os.environ, "DATABASE_URL": dsn, "REDIS_URL": redis_url, "SECRET_KEY": secret}
        # Every client here is one loopback address: the per-IP read budget (meant for one
        # client among many) is off; the per-user budget and its Redis round trip stay on.
        env.setdefault("RATE_LIMIT_READS_PER_IP_PER_MINUTE", "0")
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        kinds = variants()
        # The API always (the warm-up reads through it); the stock server for its variants.
        apps = [API_APP] + (
            [STOCK_APP] if any(kinds[k].server == STOCK_APP for k in chosen) else []
        )
        bases: dict[str, str] = {}
        logs = {API_APP: log, STOCK_APP: log.with_name(f"{log.stem}_stock.log")}
        for app_name in apps:
            port = free_port()
            servers[app_name] = start_server(app_name, env, port, args.workers, logs[app_name])
            bases[app_name] = f"http://127.0.0.1:{port}"
        for app_name in apps:
            await wait_ready(bases[app_name], servers[app_name], logs[app_name])
        await asyncio.sleep(0.5)  # --workers N: let every worker finish its startup
        pids = {a: process_tree(p.pid) for a, p in servers.items()}
        base = bases[API_APP]

        viewers = await pick_viewers(dsn, args.viewers, args.seed, settings.active_days)
        headers = {
            uid: {
                "authorization": f"Bearer {issue_token(settings, uid)}",
                "content-type": "application/json",
            }
            for uid in {u for cls in classes for u in viewers[cls]}
        }
        # Warm-up: cold timelines are rebuilt from Postgres by the first read.
        everyone = sorted({u for cls in classes for u in viewers[cls]})
        started = time.perf_counter()
        chrono = kinds["chrono"]
        replies = await each(base, chrono, [(headers[u], chrono.body()) for u in everyone], 10)
        cold_degraded = sum(check(r, "feed")[1] for r in replies)
        missing = await wait_for_timelines(redis, everyone)
        for key in chosen:
            variant = kinds[key]
            await each(
                bases[variant.server], variant, [(headers[u], variant.body()) for u in everyone], 10
            )
        print(
            f"warm-up: {len(everyone)} viewers, {cold_degraded} cold reads served from "
            f"Postgres while their timelines were rebuilt, {missing} timelines still "
            f"missing, {time.perf_counter() - started:.1f} s",
            flush=True,
        )

        results: dict[tuple[str, str, int], Result] = {}
        for cls in classes:
            for n in clients:
                for key in chosen:
                    variant = kinds[key]
                    if key == "next":
                        # Fresh sessions: each viewer's second RANKED page.
                        firsts = await each(
                            base,
                            kinds["ranked"],
                            [(headers[u], kinds["ranked"].body()) for u in viewers[cls]],
                            10,
                        )
                        cursors = [
                            orjson.loads(r.content)["data"]["feed"]["pageInfo"]["endCursor"]
                            for r in firsts
                        ]
                        requests = [
                            (headers[u], variant.body(after=c))
                            for u, c in zip(viewers[cls], cursors, strict=True)
                            if c is not None
                        ]
                    else:
                        requests = [(headers[u], variant.body()) for u in viewers[cls]]
                    r = await closed_loop(
                        bases[variant.server],
                        variant,
                        requests,
                        n,
                        args.seconds,
                        pids[variant.server],
                        args.seed,
                    )
                    results[(cls, key, n)] = r
                    print(
                        f"{cls:6} {key:6} {n:3} clients: {r.rate:7.0f} req/s  "
                        f"p50 {r.pct(0.5):7.1f} ms  p99 {r.pct(0.99):7.1f} ms  "
                        f"errors {r.errors}  degraded {r.degraded}"
                        + (f"  first error: {r.first_error}" if r.first_error else ""),
                        flush=True,
                    )

        print()
        print(
            f"Data set: {counts['users']:,} users, {counts['follows']:,} follows, "
            f"{counts['posts']:,} posts (database {name}). Servers: uvicorn {API_APP} and "
            f"{STOCK_APP} (naive, memory), {args.workers} worker(s) each, uvloop + httptools; "
            f"{args.seconds:g} s per cell; "
            f"viewers: {len(viewers['random'])} random active, {len(viewers['heavy'])} heavy; "
            f"page size {PAGE}; {os.cpu_count()} CPUs shared by server, Postgres, Redis and "
            "this load generator."
        )
        for cls in classes:
            print()
            print(table(results, cls, clients))
        print()
        print(targets(results, clients))
    finally:
        stop_processes(servers.values(), signal.SIGINT, timeout=15)
        await redis.flushdb()
        await redis.aclose()
        release_database(base_db, name, owned)


def main(argv: Sequence[str] | None = None) -> None:
    parser = seeded_parser(__doc__, users=100_000, avg_following=50, posts=2_000_000)
    parser.add_argument("--clients", default="1,10,50")
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--viewers", type=int, default=200, help="random active viewers")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--classes", default=",".join(CLASSES))
    parser.add_argument("--redis-db", type=int, default=12)
    args = parser.parse_args(argv)
    try:
        import uvloop
    except ImportError:
        asyncio.run(run(args))
    else:
        uvloop.run(run(args))  # the load generator shares the cores: keep it cheap


if __name__ == "__main__":
    main()
