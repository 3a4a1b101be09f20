"""Fan-out through the REAL write path: createPost's transaction -> outbox -> relay -> ARQ
worker processes -> Lua batches into 50,000 timelines, next to the raw Redis rates measured
in the same run on the same server.

    python -m benchmarks.fanout_path [--followers 50000] [--posts 10] [--workers 2]

Uses DATABASE_URL's server (a scratch database it creates and drops) and REDIS_URL's server
(a scratch db it FLUSHES; never db 0). Prints a table; figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from redis.asyncio import Redis

from app.config import PROJECT_ROOT
from app.posts.ids import EPOCH_MS
from app.timelines.store import timeline_key
from devtools.provision import create_database, drop_database, migrate

BENCH_ENV = {
    "FANOUT_PULL_THRESHOLD": "100000000",  # keep the author in PUSH whatever the size
    "FANOUT_PUSH_THRESHOLD": "90000000",
    "BIG_AUTHOR_FOLLOWERS": "100000000",
    "TIMELINE_MAX": "800",
    "FANOUT_BATCH_SIZE": "1000",
}


def _with_db(url: str, path: str) -> str:
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, path, p.query, p.fragment))


async def _commandstats(redis: Redis) -> dict[str, tuple[int, int]]:
    stats = await redis.info("commandstats")
    return {k[len("cmdstat_") :]: (v["calls"], v["usec"]) for k, v in stats.items()}


async def raw_rates(redis: Redis, url: str, n: int = 200_000) -> dict[str, float]:
    """The baselines: redis-benchmark's pipelined ZADD and a redis-py pipeline of ZADD."""
    rates: dict[str, float] = {}
    binary = shutil.which("redis-benchmark")
    if binary:
        p = urlsplit(url)
        done = await asyncio.to_thread(
            subprocess.run,
            [
                binary,
                "-h",
                p.hostname or "127.0.0.1",
                "-p",
                str(p.port or 6379),
                "--dbnum",
                p.path.strip("/") or "0",
                "-P",
                "64",
                "-r",
                "1000000",
                "-n",
                str(n),
                "-q",
                "--csv",
                "zadd",
                "tl:__rand_int__",
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
                pipe.zadd(f"raw:{{{i % 50_000}}}", {f"{1_790_000_000_000_000_000 + i}": i})
            await pipe.execute()
    rates["redis-py pipeline ZADD x1000"] = n / (time.perf_counter() - start)
    await redis.flushdb()
    return rates


async def seed(dsn: str, followers: int) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        author = await conn.fetchval(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at, "
            "follower_count) VALUES ('author', 'x', 'Author', now(), $1) RETURNING id",
            followers,
        )
        await conn.execute(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at, "
            "following_count) SELECT 'f' || g, 'x', 'F', now(), 1 FROM generate_series(1, $1) g",
            followers,
        )
        await conn.execute(
            "INSERT INTO follows (follower_id, followee_id) "
            "SELECT id, $1 FROM users WHERE id <> $1",
            author,
        )
        await conn.execute("ANALYZE")
        return int(author)
    finally:
        await conn.close()


async def materialize(redis: Redis, first_id: int, count: int, fill: int) -> None:
    """Existing timelines (empty or full), as active users have: fan-out skips missing ones."""
    from app.timelines.store import TimelineStore

    store = TimelineStore(redis, 800, 200)
    old_ms = 1_750_000_000_000  # mid 2025: older than anything the benchmark posts
    entries = [(((old_ms + i - EPOCH_MS) << 22), old_ms + i) for i in range(fill)]
    for start in range(first_id, first_id + count, 500):
        await asyncio.gather(
            *(store.rebuild(u, entries) for u in range(start, min(start + 500, first_id + count)))
        )


async def wait_batches(
    redis: Redis, post_ids: list[int], author: int, followers: int, every: float
) -> None:
    """Done when every FanoutBatch job has a result: ids are fb:<post>:<first follower>."""
    keys = [
        f"arq:result:fb:{p}:{first}"
        for p in post_ids
        for first in range(author + 1, author + followers + 1, 1000)
    ]
    while await redis.exists(*keys) < len(keys):
        await asyncio.sleep(every)


def start_workers(env: dict[str, str], n: int) -> list[subprocess.Popen[bytes]]:
    arq = str(Path(sys.executable).parent / "arq")
    return [
        subprocess.Popen(
            [arq, "jobs.worker.WorkerSettings"],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(n)
    ]


async def run(args: argparse.Namespace) -> None:
    base_db = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    redis_url = _with_db(
        os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), f"/{args.redis_db}"
    )
    name = f"bench_fanout_{uuid.uuid4().hex[:6]}"
    dsn = create_database(base_db, name)
    redis = Redis.from_url(redis_url)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        migrate(dsn)
        await redis.flushdb()
        baselines = await raw_rates(redis, redis_url)
        author = await seed(dsn, args.followers)
        env = {**os.environ, **BENCH_ENV, "DATABASE_URL": dsn, "REDIS_URL": redis_url}
        os.environ.update(env)
        from arq import create_pool

        from app.outbox.relay import OutboxRelay
        from app.posts.service import create_post
        from app.state import create_state
        from jobs.worker import redis_settings

        state = create_state()
        arq = await create_pool(redis_settings())

        async def enqueue(function: str, *a: object, job_id: str, lane: str) -> None:
            await arq.enqueue_job(function, *a, _job_id=job_id, _queue_name=lane)

        relay = OutboxRelay(state.engine, enqueue)
        workers = start_workers(env, args.workers)
        await asyncio.sleep(2.0)  # workers connect and register

        results = []
        for fill, label in ((0, "empty timelines"), (800, "full timelines (800)")):
            await redis.flushdb()
            await materialize(redis, author + 1, args.followers, fill)
            await arq.aclose()
            arq = await create_pool(redis_settings())
            for _ in range(2):  # the first post of a phase warms caches; report the second
                before = await _commandstats(redis)
                t0 = time.perf_counter()
                async with state.sessions.begin() as session:
                    post = await create_post(session, author, "bench", "public", None, 500)
                committed = time.perf_counter()
                await relay.drain()
                await wait_batches(redis, [post.id], author, args.followers, 0.002)
                done = time.perf_counter()
                after = await _commandstats(redis)
            calls = after["evalsha"][0] - before.get("evalsha", (0, 0))[0]
            usec = after["evalsha"][1] - before.get("evalsha", (0, 0))[1]
            results.append(
                (
                    label,
                    1,
                    done - committed,
                    args.followers / (done - committed),
                    usec / args.followers,
                    calls,
                )
            )
            # Throughput: several posts back to back.
            before = await _commandstats(redis)
            t0 = time.perf_counter()
            made = []
            for i in range(args.posts):
                async with state.sessions.begin() as session:
                    made.append(
                        (await create_post(session, author, f"b{i}", "public", None, 500)).id
                    )
            await relay.drain()
            await wait_batches(redis, made, author, args.followers, 0.005)
            elapsed = time.perf_counter() - t0
            after = await _commandstats(redis)
            usec = after["evalsha"][1] - before["evalsha"][1]
            inserts = args.posts * args.followers
            results.append((label, args.posts, elapsed, inserts / elapsed, usec / inserts, 0))
            async with redis.pipeline(transaction=False) as pipe:
                for uid in range(author + 1, author + args.followers + 1):
                    pipe.zscore(timeline_key(uid), str(post.id))
                holding = sum(s is not None for s in await pipe.execute())
            assert holding == args.followers, f"only {holding} timelines hold the post"
        await arq.aclose()
        await state.close()

        print(
            f"\nFan-out through the real worker path ({args.workers} ARQ worker processes, "
            f"{args.followers:,} active followers, batches of 1,000)\n"
        )
        print("| baseline (same server, same run) | inserts/s |\n|---|---:|")
        for k, v in baselines.items():
            print(f"| {k} | {v:,.0f} |")
        pipe_rate = baselines["redis-py pipeline ZADD x1000"]
        print(
            "\n| timelines | posts | commit -> last timeline written | inserts/s | x pipelined ZADD | Redis server us/insert |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for label, posts, secs, rate, us, _ in results:
            print(
                f"| {label} | {posts} | {secs * 1000:,.0f} ms | {rate:,.0f} | {rate / pipe_rate:.2f}x | {us:.2f} |"
            )
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=10)
            except subprocess.TimeoutExpired:
                w.kill()
        await redis.flushdb()
        await redis.aclose()
        drop_database(base_db, name)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--followers", type=int, default=50_000)
    parser.add_argument("--posts", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-db", type=int, default=14)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
