"""The fan-out control plane against the constant thresholds (issue 21), one run, same servers:
a burst of posts from an author with 20,000 active followers while 50 ordinary authors post,
through the REAL write path (createPost's transaction -> outbox -> relay -> ARQ worker
processes), once with FANOUT_CONTROL=threshold and once with FANOUT_CONTROL=cost.

    python -m benchmarks.control_plane [--followers 20000] [--burst 60] [--burst-seconds 6]
        [--ordinary 50] [--ordinary-followers 100] [--ordinary-posts 4] [--workers 2]

The thresholds are raised for the run (FANOUT_PULL_THRESHOLD=50,000) so that the constant rule
keeps the burst author PUSH, as it keeps any author below 10,000 followers by default: what is
compared is the burst detection, not the follower count. BIG_AUTHOR_FOLLOWERS is raised too, so
every batch shares the default lane (the flood the issue describes). Reported per variant:
ordinary posts' post-to-visible (commit -> every follower's timeline written, or, for a post
that went PULL, -> indexed under its author), p50/p99/max, and the default lane's lag (age of
its oldest waiting job) sampled every 0.5 s. Uses DATABASE_URL's server (a scratch database it
creates and drops) and REDIS_URL's server (a scratch db it FLUSHES; never db 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

import asyncpg
from redis.asyncio import Redis

from app.fanout import lanes
from benchmarks.common import job_results, percentile, scratch, stop_processes
from benchmarks.fanout_path import batches_of, materialize, start_workers

BENCH_ENV = {
    "FANOUT_PULL_THRESHOLD": "50000",  # the constant rule keeps the 20,000-follower author PUSH
    "FANOUT_PUSH_THRESHOLD": "40000",
    "BIG_AUTHOR_FOLLOWERS": "100000000",  # one lane: the burst's batches beside everyone's
    "TIMELINE_MAX": "800",
    "FANOUT_BATCH_SIZE": "1000",
    "FANOUT_REVIEW_SECONDS": "5",
    "RATE_LIMIT_WRITES_PER_MINUTE": "1000000",
}
VARIANTS = ("threshold", "cost")
SAMPLE_SECONDS = 0.5


async def seed(
    dsn: str, followers: int, ordinary: int, ordinary_followers: int
) -> tuple[int, list[int]]:
    """The burst author (id 1), `ordinary` authors, then `followers` active users who all
    follow the burst author; ordinary author i is followed by a slice of them. One INSERT
    each, as the other benchmarks seed."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at) "
            "SELECT 'a' || g, 'x', 'A', now() FROM generate_series(0, $1) g",
            ordinary,
        )
        first = ordinary + 2
        await conn.execute(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at) "
            "SELECT 'f' || g, 'x', 'F', now() FROM generate_series(1, $1) g",
            followers,
        )
        await conn.execute(
            "INSERT INTO follows (follower_id, followee_id) SELECT id, 1 FROM users WHERE id >= $1",
            first,
        )
        await conn.execute(
            "INSERT INTO follows (follower_id, followee_id) "
            "SELECT $1 + ((a - 2) * $2 + k) % $3, a "
            "FROM generate_series(2, $4) a, generate_series(0, $2 - 1) k",
            first,
            ordinary_followers,
            followers,
            ordinary + 1,
        )
        await conn.execute(
            "UPDATE users u SET follower_count = c.n FROM (SELECT followee_id, count(*) n "
            "FROM follows GROUP BY followee_id) c WHERE u.id = c.followee_id"
        )
        await conn.execute("VACUUM ANALYZE")
        return first, list(range(2, ordinary + 2))
    finally:
        await conn.close()


@dataclass
class Variant:
    name: str
    visible_ms: list[float] = field(default_factory=list)
    lag: list[float] = field(default_factory=list)  # the default lane's, every SAMPLE_SECONDS
    burst_pulled: int = 0  # burst posts split in PULL mode
    ordinary_pulled: int = 0
    seconds: float = 0.0  # first post -> every fan-out done


async def run_variant(
    args: argparse.Namespace, name: str, dsn: str, redis: Redis, env: dict[str, str], first: int,
    ordinary: list[int],
) -> Variant:  # fmt: skip
    from arq import create_pool

    from app.fanout.lag import lane_lag_seconds
    from app.posts.service import create_post
    from app.relay import OutboxRelay
    from app.state import create_state
    from jobs.connections import redis_settings

    await redis.flushdb()
    conn = await asyncpg.connect(dsn)
    await conn.execute("UPDATE users SET fanout_mode = 0, fanout_mode_changed_at = NULL")
    await conn.close()
    await materialize(redis, "packed", first, args.followers, 1)
    workers = start_workers({**env, "FANOUT_CONTROL": name}, args.workers)
    await asyncio.sleep(2.0)  # workers connect and register
    state = create_state()
    arq = await create_pool(redis_settings(state.settings))

    async def enqueue(function: str, *a: object, job_id: str, lane: str) -> None:
        await arq.enqueue_job(function, *a, _job_id=job_id, _queue_name=lane)

    relay = OutboxRelay(state.engine, enqueue)
    result = Variant(name)
    committed: dict[int, float] = {}  # ordinary post -> commit time (epoch s)
    burst_ids: list[int] = []
    stop = asyncio.Event()

    async def relaying() -> None:
        while not stop.is_set():
            await relay.drain()
            await asyncio.sleep(0.005)

    async def sampling() -> None:
        while not stop.is_set():
            result.lag.append((await lane_lag_seconds(redis))["default"][0])
            await asyncio.sleep(SAMPLE_SECONDS)

    async def posting(author: int, n: int, every: float, out: list[int], stamp: bool) -> None:
        for i in range(n):
            async with state.sessions.begin() as session:
                made = await create_post(session, author, f"p{i}", "public", None, 500)
            if stamp:
                committed[made.id] = time.time()
            out.append(made.id)
            await asyncio.sleep(every)

    background = [asyncio.create_task(relaying()), asyncio.create_task(sampling())]
    t0 = time.perf_counter()
    plain: list[int] = []
    spread = args.burst_seconds
    await asyncio.gather(
        posting(1, args.burst, spread / args.burst, burst_ids, False),
        *(
            posting(a, args.ordinary_posts, spread / args.ordinary_posts, plain, True)
            for a in ordinary
        ),
    )
    # Done when the default lane is empty and every split has its result.
    while True:
        _, queued = (await lane_lag_seconds(redis))["default"]
        if queued == 0:
            results = await job_results(redis)
            splits = [r for r in results.values() if r.function == lanes.FANOUT_POST]
            if len(splits) >= args.burst + len(plain):
                break
        await asyncio.sleep(0.1)
    result.seconds = time.perf_counter() - t0
    stop.set()
    await asyncio.gather(*background)
    split_of = {
        int(r.args[0]): r for r in results.values() if r.function == lanes.FANOUT_POST and r.args
    }
    for post_id in burst_ids:
        result.burst_pulled += split_of[post_id].result == 0
    for post_id, at in committed.items():
        split = split_of[post_id]
        if split.result == 0:  # PULL: visible once indexed under its author (the split)
            result.ordinary_pulled += 1
            done = split.finish_time
        else:
            done = max(b.finish_time for b in batches_of(results, post_id))
        result.visible_ms.append((done.timestamp() - at) * 1000)
    await arq.aclose()
    await state.close()
    stop_processes(workers)
    return result


async def run(args: argparse.Namespace) -> None:
    load = [os.getloadavg()[0]]
    async with scratch("bench_control", args.redis_db) as servers:
        dsn, redis = servers.dsn, servers.redis
        first, ordinary = await seed(dsn, args.followers, args.ordinary, args.ordinary_followers)
        env = servers.env(**BENCH_ENV)
        os.environ.update(env)
        variants = []
        for variant in args.variants.split(","):
            variants.append(await run_variant(args, variant, dsn, redis, env, first, ordinary))
            load.append(os.getloadavg()[0])
    print(
        f"\nControl plane: a burst of {args.burst} posts in {args.burst_seconds:g} s from an "
        f"author with {args.followers:,} active followers while {args.ordinary} ordinary authors "
        f"({args.ordinary_followers} active followers each) post {args.ordinary_posts} times "
        f"each; {args.workers} ARQ worker processes on one lane; FANOUT_PULL_THRESHOLD=50,000; "
        f"load average {min(load):.1f}-{max(load):.1f} on {os.cpu_count()} cores\n"
    )
    print(
        "| FANOUT_CONTROL | ordinary posts | post-to-visible p50 | p99 | max | within 5 s "
        "| burst posts PULL | ordinary posts PULL | default lane lag max | all done |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for v in variants:
        within = sum(1 for x in v.visible_ms if x <= 5000) / len(v.visible_ms)
        print(
            f"| {v.name} | {len(v.visible_ms)} | {statistics.median(v.visible_ms):,.0f} ms "
            f"| {percentile(v.visible_ms, 0.99):,.0f} ms | {max(v.visible_ms):,.0f} ms "
            f"| {within:.0%} | {v.burst_pulled}/{args.burst} | {v.ordinary_pulled} "
            f"| {max(v.lag):.1f} s | {v.seconds:.1f} s |"
        )
    print(f"\nThe default lane's lag (s), every {SAMPLE_SECONDS:g} s from the first post:\n")
    for v in variants:
        print(f"- {v.name}: " + " ".join(f"{x:.1f}" for x in v.lag))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--followers", type=int, default=20_000)
    parser.add_argument("--burst", type=int, default=60)
    parser.add_argument("--burst-seconds", type=float, default=6.0)
    parser.add_argument("--ordinary", type=int, default=50)
    parser.add_argument("--ordinary-followers", type=int, default=100)
    parser.add_argument("--ordinary-posts", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis-db", type=int, default=14)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main(sys.argv[1:])
