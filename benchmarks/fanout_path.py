"""Fan-out through the REAL write path: createPost's transaction -> outbox -> relay -> ARQ
worker processes -> Lua batches into 50,000 timelines (the packed layout; the zset one is
retired, decision 0034), next to the raw Redis rates measured in the same run on the same
server, then the store-level figures (`benchmarks.timeline_encoding`: memory, server time
per insert, reads).

    python -m benchmarks.fanout_path [--followers 50000] [--posts 10] [--workers 2]
        [--latency-runs 3] [--timelines both|empty|full] [--online N] [--no-store]

The throughput run also reports each process's CPU (/proc/<pid>/stat: the workers, this
process with the relay, Redis when it runs here, the scratch database's PostgreSQL backends)
and Redis time per command (INFO commandstats).

Uses DATABASE_URL's server (a scratch database it creates and drops) and REDIS_URL's server
(a scratch db it FLUSHES; never db 0). Prints tables; figures go to docs/benchmarks/archive.md.

`--cluster`: the timelines and the live counts (REDIS_TIMELINES_URL, REDIS_PUBSUB_URL) on a
3-master cluster started here from the same server binary (tests/timelines/local_cluster.py),
ARQ's queues still on REDIS_URL's server (decision 0041): the fan-out's per-node calls
(decision 0089). The Redis CPU and time-per-command tables then cover the queue's server only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

from app.config import PROJECT_ROOT
from app.fanout import lanes
from app.posts.ids import EPOCH_MS
from benchmarks.common import (
    cpu_seconds,
    is_loopback,
    job_results,
    raw_rates,
    scratch,
    stop_processes,
)

BENCH_ENV = {
    "FANOUT_PULL_THRESHOLD": "100000000",  # keep the author in PUSH whatever the size
    "FANOUT_PUSH_THRESHOLD": "90000000",
    "BIG_AUTHOR_FOLLOWERS": "100000000",
    "TIMELINE_MAX": "800",
    "FANOUT_BATCH_SIZE": "1000",
    # The write path, not the control plane: a burst of posts would switch the author to PULL
    # (cost control) and queue its catch-up on the big lane, which this benchmark does not run.
    "FANOUT_CONTROL": "threshold",
    "FANOUT_REVIEW_SECONDS": "0",
}
PHASES = {"empty": ((0, "empty"),), "full": ((800, "full (800)"),)}
PHASES["both"] = PHASES["empty"] + PHASES["full"]


async def _commandstats(redis: Redis) -> dict[str, tuple[int, int]]:
    stats = await redis.info("commandstats")
    return {k[len("cmdstat_") :]: (v["calls"], v["usec"]) for k, v in stats.items()}


def cpu_of(procs: dict[str, list[int]]) -> dict[str, float]:
    return {k: cpu_seconds(v) for k, v in procs.items()}


async def process_ids(redis: Redis, dsn: str) -> dict[str, list[int]]:
    """The processes whose CPU a throughput run reports: Redis (when on this machine) and the
    PostgreSQL backends of the scratch database."""
    found: dict[str, list[int]] = {}
    if is_loopback(redis_url_of(redis)):
        found["redis-server"] = [int((await redis.info("server"))["process_id"])]
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        )
        found["postgres backends"] = [int(r["pid"]) for r in rows]
    finally:
        await conn.close()
    return found


def redis_url_of(redis: Redis) -> str:
    kw = redis.connection_pool.connection_kwargs
    return f"redis://{kw.get('host', '127.0.0.1')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


def cpu_table(before: dict[str, float], after: dict[str, float], seconds: float) -> str:
    """Each process's share of one core and of the machine over `seconds` of wall time."""
    cores = os.cpu_count() or 1
    rows = [
        "| process | CPU s | share of one core | share of the machine |",
        "|---|---:|---:|---:|",
    ]
    for name in after:
        used = after[name] - before.get(name, 0.0)
        rows.append(
            f"| {name} | {used:.2f} | {used / seconds:.0%} | {used / seconds / cores:.0%} |"
        )
    return "\n".join(rows)


def commandstats_table(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], inserts: int
) -> str:
    """Redis time per command over a run: calls, usec per call, share, us per insert."""
    delta = {
        k: (c - before.get(k, (0, 0))[0], u - before.get(k, (0, 0))[1])
        for k, (c, u) in after.items()
    }
    delta = {k: v for k, v in delta.items() if v[0] > 0 and not k.startswith("info")}
    total = sum(u for _, u in delta.values()) or 1
    # A late insert (the post older than a timeline's newest entry) is the only STRLEN in the
    # insert scripts, one older than every probed entry the only GET (app.timelines.scripts).
    late = delta.get("strlen", (0, 0))[0] + delta.get("get", (0, 0))[0]
    rows = [
        f"late inserts: {late:,} of {inserts:,} ({late / max(inserts, 1):.0%})",
        "",
        "| command | calls | usec/call | share | us/insert |",
        "|---|---:|---:|---:|---:|",
    ]
    for k, (calls, usec) in sorted(delta.items(), key=lambda kv: -kv[1][1])[:12]:
        rows.append(
            f"| {k} | {calls:,} | {usec / calls:.1f} | {usec / total:.0%} | {usec / inserts:.3f} |"
        )
    return "\n".join(rows)


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
        await conn.execute("VACUUM ANALYZE")  # as autovacuum leaves a live table
        return int(author)
    finally:
        await conn.close()


async def materialize(redis: Redis, encoding: str, first_id: int, count: int, fill: int) -> None:
    """Existing timelines (empty or full), as active users have: fan-out skips missing ones.
    One template built by the store in `encoding`, copied server-side into every timeline."""
    from app.timelines.store import TimelineStore, timeline_key
    from benchmarks.timeline_encoding import COPY_SCRIPT

    store = TimelineStore(redis, 800, 200)
    old_ms = 1_750_000_000_000  # mid 2025: older than anything the benchmark posts
    entries = [(((old_ms + i - EPOCH_MS) << 22), old_ms + i) for i in range(fill)]
    await store.rebuild(-1, entries)
    copy = redis.register_script(COPY_SCRIPT)
    users = range(first_id, first_id + count)
    for i in range(0, count, 2000):
        await copy(keys=[timeline_key(-1)], args=[timeline_key(u) for u in users[i : i + 2000]])
    await redis.delete(timeline_key(-1))


async def mark_online(redis: Any, settings: Any, first: int, followers: int, count: int) -> None:
    """`--online N`: N of the followers, spread evenly (every batch has some), are marked
    online as a hub marks its sockets' users, so their batches keep live counts."""
    from app.realtime.counts import mark_online as mark

    step = max(1, followers // count)
    users = list(range(first, first + followers, step))[:count]
    for i in range(0, len(users), 1000):
        await mark(redis, users[i : i + 1000], settings)


async def wait_batches(redis: Redis, post_ids: list[int], every: float) -> None:
    """Done when every post's fan-out is done: `fo:<post>` has `done` (jobs.tracking: set by
    the job that settles last, the batches' in the same call as their insert), whatever
    the jobs' shape (one per 1,000 followers before decision 0054, groups of pages since)."""
    from jobs.tracking import state_key

    waiting = list(post_ids)
    while waiting:
        async with redis.pipeline(transaction=False) as pipe:
            for post_id in waiting:
                pipe.hexists(state_key(post_id), "done")
            found = await pipe.execute()
        waiting = [p for p, f in zip(waiting, found, strict=True) if not f]
        if waiting:
            await asyncio.sleep(every)


def start_workers(env: dict[str, str], n: int) -> list[subprocess.Popen[bytes]]:
    """`python -m arq` in the checkout: its own code first on sys.path (the `arq` script
    would import an installed checkout's before a worktree's)."""
    return [
        subprocess.Popen(
            [sys.executable, "-m", "arq", "jobs.worker.WorkerSettings"],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(n)
    ]


def start_spies(
    out_dir: str | None, workers: list[subprocess.Popen[bytes]], label: str
) -> list[subprocess.Popen[bytes]]:
    """`--py-spy DIR`: sample every worker (collapsed stacks, one file per worker); the
    profiler is `$PY_SPY` when set (it is no project dependency), else the venv's."""
    if not out_dir:
        return []
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    spy = os.environ.get("PY_SPY") or str(Path(sys.executable).parent / "py-spy")
    return [
        subprocess.Popen(
            [spy, "record", "--pid", str(w.pid), "--format", "raw", "--rate", "250",
             "--output", str(Path(out_dir) / f"{label}-{i}.txt")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i, w in enumerate(workers)
    ]  # fmt: skip


@dataclass
class Row:
    encoding: str
    timelines: str
    posts: int
    seconds: float  # commit -> last timeline written (1 post: median of the runs)
    rate: float  # inserts/s
    us_per_insert: float  # EVALSHA usec / inserts (commandstats)
    runs: str = ""  # every run's latency, ms


async def trace(redis: Redis, post_id: int) -> str:
    """Where one post's time went, from its jobs' ARQ results (ms after the split started)."""
    results = await job_results(redis)
    split = [
        r for r in results.values() if r.function == lanes.FANOUT_POST and r.args == (post_id,)
    ]
    batches = batches_of(results, post_id)
    if not split:
        return "no results"
    t0 = split[0].start_time

    def ms(t: Any) -> float:
        return (t - t0).total_seconds() * 1000

    if not batches:  # the split wrote every page itself (decision 0064)
        return (
            f"split queued {ms(split[0].enqueue_time):.0f}, ran 0-{ms(split[0].finish_time):.0f}"
            "; no batch jobs"
        )

    busy = sum((b.finish_time - b.start_time).total_seconds() for b in batches) * 1000
    return (
        f"split queued {ms(split[0].enqueue_time):.0f}, ran 0-{ms(split[0].finish_time):.0f}; "
        f"{len(batches)} batches queued {min(ms(b.enqueue_time) for b in batches):.0f}-"
        f"{max(ms(b.enqueue_time) for b in batches):.0f}, started "
        f"{min(ms(b.start_time) for b in batches):.0f}-{max(ms(b.start_time) for b in batches):.0f}"
        f", finished {min(ms(b.finish_time) for b in batches):.0f}-"
        f"{max(ms(b.finish_time) for b in batches):.0f}; batch run time sum {busy:.0f} ms "
        f"(mean {busy / len(batches):.1f})"
    )


def batches_of(results: dict[str, Any], post_id: int) -> list[Any]:
    """The post's FanoutBatch results (their arguments: author, [(post, ms), ...], page)."""
    return [
        r
        for r in results.values()
        if r.function == lanes.FANOUT_BATCH and any(e[0] == post_id for e in r.args[1])
    ]


async def holding(redis: Any, encoding: str, first: int, count: int, post_id: int) -> int:
    """How many of the timelines hold the post (through the store: either layout)."""
    from app.timelines.store import TimelineStore

    store = TimelineStore(redis, 800, 200)
    found = await store.latest_many(list(range(first, first + count)), 800)
    return sum(1 for rows in found.values() if any(p == post_id for p, _ in rows))


async def run(args: argparse.Namespace) -> None:
    async with scratch(args.db_prefix, args.redis_db) as servers:
        if not args.cluster:
            await measure(args, servers.dsn, servers.redis_url, servers.redis, servers.env())
            return
        from app.redis_client import Cluster
        from tests.cluster_topology import cluster_url
        from tests.timelines.local_cluster import local_cluster

        async with local_cluster(3) as seed:
            url = cluster_url(seed)
            timelines = Cluster.from_url(seed)
            try:
                env = servers.env(REDIS_TIMELINES_URL=url, REDIS_PUBSUB_URL=url)
                await measure(args, servers.dsn, servers.redis_url, servers.redis, env, timelines)
            finally:
                await timelines.aclose()


async def materialize_cluster(cluster: Any, first_id: int, count: int, fill: int) -> None:
    """`materialize` on a cluster: the same packed body SET into every timeline."""
    from app.timelines import packed
    from app.timelines.scripts import FORMAT_BYTE
    from app.timelines.store import timeline_keys

    old_ms = 1_750_000_000_000
    body = FORMAT_BYTE + packed.pack_ids(((old_ms + i - EPOCH_MS) << 22) for i in range(fill))
    keys = timeline_keys(range(first_id, first_id + count))
    for i in range(0, count, 2000):
        pipe = cluster.pipeline(transaction=False)
        for key in keys[i : i + 2000]:
            pipe.set(key, body)
        await pipe.execute()


async def measure(
    args: argparse.Namespace,
    dsn: str,
    redis_url: str,
    redis: Redis,
    env: dict[str, str],
    timelines: Any = None,
) -> None:
    """`timelines`: the cluster client when the timelines live there (`--cluster`)."""
    workers: list[subprocess.Popen[bytes]] = []
    load = [os.getloadavg()[0]]
    try:
        baselines = {k: [v] for k, v in (await raw_rates(redis, redis_url)).items()}
        author = await seed(dsn, args.followers)
        env = {**env, **BENCH_ENV}
        os.environ.update(env)
        from arq import create_pool

        from app.posts.service import create_post
        from app.relay import OutboxRelay
        from app.state import create_state
        from jobs.connections import redis_settings

        state = create_state()
        arq = await create_pool(redis_settings(state.settings))

        async def enqueue(function: str, *a: object, job_id: str, lane: str) -> None:
            await arq.enqueue_job(function, *a, _job_id=job_id, _queue_name=lane)

        relay = OutboxRelay(state.engine, enqueue)

        async def one_post(text: str) -> tuple[int, float, float]:
            """(post id, commit -> last timeline written, EVALSHA usec)."""
            before = await _commandstats(redis)
            async with state.sessions.begin() as session:
                post = await create_post(session, author, text, "public", None, 500)
            committed = time.perf_counter()
            await relay.drain()
            await wait_batches(redis, [post.id], 0.001)
            done = time.perf_counter()
            after = await _commandstats(redis)
            usec = after["evalsha"][1] - before.get("evalsha", (0, 0))[1]
            return post.id, done - committed, usec

        results: list[Row] = []
        shares: list[str] = []
        for encoding in args.encodings.split(","):
            workers = start_workers({**env, "TIMELINE_ENCODING": encoding}, args.workers)
            await asyncio.sleep(2.0)  # workers connect and register
            for fill, label in PHASES[args.timelines]:
                await redis.flushdb()
                if timelines is not None:
                    await timelines.flushdb(target_nodes=timelines.PRIMARIES)
                    await materialize_cluster(timelines, author + 1, args.followers, fill)
                else:
                    await materialize(redis, encoding, author + 1, args.followers, fill)
                if args.online:
                    await mark_online(
                        timelines or redis, state.settings, author + 1, args.followers, args.online
                    )
                await arq.aclose()
                arq = await create_pool(redis_settings(state.settings))
                await one_post("warm-up")  # the first post of a phase warms caches
                runs = [await one_post(f"latency {i}") for i in range(args.latency_runs)]
                post_id = runs[-1][0]
                if args.trace:
                    print(
                        f"  [{encoding}, {label}] " + await trace(redis, post_id), file=sys.stderr
                    )
                secs = statistics.median(r[1] for r in runs)
                usec = statistics.median(r[2] for r in runs)
                results.append(
                    Row(
                        encoding,
                        label,
                        1,
                        secs,
                        args.followers / secs,
                        usec / args.followers,
                        "/".join(f"{r[1] * 1000:.0f}" for r in runs),
                    )
                )
                # Throughput: several posts back to back.
                spies = start_spies(args.py_spy, workers, f"{encoding}-{fill}")
                procs = {f"arq worker {i}": [w.pid] for i, w in enumerate(workers)}
                procs["benchmark (relay, client)"] = [os.getpid()]
                procs.update(await process_ids(redis, dsn))

                cpu0 = cpu_of(procs)
                before = await _commandstats(redis)
                t0 = time.perf_counter()
                made = []
                for i in range(args.posts):
                    async with state.sessions.begin() as session:
                        made.append(
                            (await create_post(session, author, f"b{i}", "public", None, 500)).id
                        )
                await relay.drain()
                await wait_batches(redis, made, 0.005)
                elapsed = time.perf_counter() - t0
                cpu1 = cpu_of(procs)
                after = await _commandstats(redis)
                stop_processes(spies, signal.SIGINT)
                shares.append(
                    f"[{encoding}, {label}, {args.posts} posts, {elapsed:.2f} s]\n\n"
                    + cpu_table(cpu0, cpu1, elapsed)
                    + "\n\n"
                    + commandstats_table(before, after, args.posts * args.followers)
                )
                usec = after["evalsha"][1] - before["evalsha"][1]
                inserts = args.posts * args.followers
                results.append(
                    Row(encoding, label, args.posts, elapsed, inserts / elapsed, usec / inserts)
                )
                held = await holding(
                    timelines or redis, encoding, author + 1, args.followers, post_id
                )
                assert held == args.followers, f"only {held} timelines hold the post"
                load.append(os.getloadavg()[0])
            stop_processes(workers)
            workers = []
        await arq.aclose()
        await state.close()
        for k, v in (await raw_rates(redis, redis_url)).items():
            baselines[k].append(v)
        store_figures = []
        if not args.no_store:
            from benchmarks import timeline_encoding

            store_args = argparse.Namespace(
                redis_url=redis_url,
                timelines=args.followers,
                posts=args.posts,
                batch=1000,
                memory_samples=2000,
                read_calls=2000,
                convert=5000,
                encodings=args.encodings,
            )
            store_figures = await timeline_encoding.run(store_args)
        load.append(os.getloadavg()[0])

        print(
            f"\nFan-out through the real worker path"
            f"{' (timelines on a 3-master cluster)' if timelines is not None else ''} "
            f"({args.workers} ARQ worker processes, "
            f"{args.followers:,} active followers, batches of 1,000); load average during the "
            f"run {min(load):.1f}-{max(load):.1f} on {os.cpu_count()} cores\n"
        )
        print("| baseline (same server, same run: start / end) | inserts/s |\n|---|---:|")
        for k, v in baselines.items():
            print(f"| {k} | {' / '.join(f'{x:,.0f}' for x in v)} |")
        bench = statistics.mean(baselines.get("redis-benchmark ZADD -P 64", [0.0])) or None
        print(
            "\n| layout | timelines | posts | commit -> last timeline written | inserts/s "
            "| x redis-benchmark -P 64 | Redis server us/insert |"
        )
        print("|---|---|---:|---:|---:|---:|---:|")
        for r in results:
            ratio = f"{r.rate / bench:.2f}x" if bench else "n/a"
            runs = f" ({r.runs})" if r.runs else ""
            print(
                f"| {r.encoding} | {r.timelines} | {r.posts} | {r.seconds * 1000:,.0f} ms{runs} "
                f"| {r.rate:,.0f} | {ratio} | {r.us_per_insert:.2f} |"
            )
        for block in shares:
            print("\nCPU and Redis time during the throughput run " + block)
        if store_figures:
            from benchmarks import timeline_encoding

            print(
                f"\nThe layouts through TimelineStore ({args.followers:,} full timelines, "
                f"{args.posts} posts into each, same server)\n"
            )
            print(timeline_encoding.report(store_figures))
    finally:
        stop_processes(workers)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--followers", type=int, default=50_000)
    parser.add_argument("--posts", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-db", type=int, default=14)
    parser.add_argument("--db-prefix", default="bench_fanout", help="scratch database name prefix")
    parser.add_argument("--encodings", default="packed")
    parser.add_argument("--timelines", choices=sorted(PHASES), default="both")
    parser.add_argument("--online", type=int, default=0, help="followers marked online")
    parser.add_argument("--latency-runs", type=int, default=3, help="1-post runs (median)")
    parser.add_argument("--no-store", action="store_true", help="skip the store-level table")
    parser.add_argument("--py-spy", metavar="DIR", help="profile the workers into DIR")
    parser.add_argument("--trace", action="store_true", help="print a post's job timeline")
    parser.add_argument(
        "--cluster", action="store_true", help="timelines and counts on a 3-master cluster"
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
