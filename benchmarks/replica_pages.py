"""Feed session pages with and without the read replica, same data, same run (decision 0043).

    python -m benchmarks.replica_pages [--users 5000 --avg-following 40 --posts 100000]
        [--viewers 40] [--pages 6] [--rounds 3]

Starts a fresh primary and a streaming standby on loopback (devtools.replica), seeds the
primary with devtools.seed's seed_bulk, and builds two composition roots on it: one with
DATABASE_REPLICA_URL (the standby) and one without. Per round and variant (alternating, so
drift of the shared machine hits both): every viewer reads a RANKED first page and then
--pages next pages of its session (`FeedService.page`, no HTTP: the difference under test is
the database work). Prints per variant: session pages/s in the loop, p50/p99 per next page,
and CPU per next page of the primary's and the standby's server processes, of this client,
with the ratios replica/primary-only. Redis: REDIS_URL's db (never db 0; flushed first).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Sequence
from typing import Any

import asyncpg

from app.config import Settings
from app.db.replica import REPLICA_READS, REPLICA_STALE_ROWS
from app.fanout import lanes
from app.feed.modes import FeedMode
from app.state import AppState, create_state
from benchmarks.common import percentile
from benchmarks.feed_read import cpu_seconds, pick_viewers, process_tree
from devtools.provision import migrate
from devtools.replica import ReplicaPair, replica_pair
from devtools.seed.bulk import seed_bulk

DB = "replica_bench"


def server_cpu(pair: ReplicaPair, which: str) -> float:
    return cpu_seconds(process_tree(pair.postmaster_pid(which)))


async def scroll(state: AppState, viewer: int, pages: int, latencies: list[float]) -> int:
    """A first page and up to `pages` next pages; the next pages' latencies. Pages read."""
    page = await state.feed.page(viewer, FeedMode.RANKED, 20, None)
    read = 0
    for _ in range(pages):
        if not page.has_next or not page.rows:
            break
        cursor = page.rows[-1][1]
        started = time.perf_counter()
        page = await state.feed.page(viewer, FeedMode.RANKED, 20, cursor)
        latencies.append(time.perf_counter() - started)
        read += 1
    return read


async def run(args: argparse.Namespace) -> None:
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/5")
    if redis_url.rstrip("/").endswith("/0"):
        raise SystemExit("REDIS_URL must name a db other than 0 (it is flushed)")
    async with replica_pair() as pair:
        await pair.create_database(DB)
        primary_url = pair.url("primary", DB)
        migrate(primary_url)
        started = time.perf_counter()
        await seed_bulk(
            primary_url, args.users, args.avg_following, args.posts, seed=42, progress=False
        )
        print(f"seeded in {time.perf_counter() - started:.0f} s", flush=True)
        viewers = (await pick_viewers(primary_url, args.viewers, 42, 30))["random"]
        while not await pair.caught_up():
            await asyncio.sleep(0.2)
        base = {"database_url": primary_url, "redis_url": redis_url}
        states = {
            "primary only": create_state(Settings(**base), pool_size=5),
            "with replica": create_state(
                Settings(
                    **base,
                    database_replica_url=pair.url("standby", DB),
                    database_replica_feed_pages=True,
                ),
                pool_size=5,
            ),
        }
        await states["primary only"].redis.flushdb()
        for viewer in viewers:  # timelines once; both roots share Redis
            await states["primary only"].fanout.rebuild_timeline(viewer)
        results: dict[str, dict[str, Any]] = {
            name: {"lat": [], "pages": 0, "wall": 0.0, "p": 0.0, "s": 0.0, "c": 0.0}
            for name in states
        }
        try:
            await splits(pair, primary_url, states, args.splits)
            for state in states.values():  # warm-up: pools, statement caches
                for viewer in viewers[:5]:
                    await scroll(state, viewer, 2, [])
            for round_ in range(args.rounds):
                order = list(states) if round_ % 2 == 0 else list(reversed(states))
                for name in order:
                    state, r = states[name], results[name]
                    state.forget_local()
                    p0, s0 = server_cpu(pair, "primary"), server_cpu(pair, "standby")
                    c0, t0 = time.process_time(), time.perf_counter()
                    for viewer in viewers:
                        r["pages"] += await scroll(state, viewer, args.pages, r["lat"])
                    r["wall"] += time.perf_counter() - t0
                    r["c"] += time.process_time() - c0
                    r["p"] += server_cpu(pair, "primary") - p0
                    r["s"] += server_cpu(pair, "standby") - s0
        finally:
            for state in states.values():
                await state.close()
        report(results, args)
        counts = {
            f"{s.name}{s.labels}": s.value
            for metric in (REPLICA_READS, REPLICA_STALE_ROWS)
            for s in metric.collect()[0].samples
            if s.name.endswith("_total")
        }
        print("replica router counters (whole run):", counts)


async def splits(pair: ReplicaPair, primary_url: str, states: dict[str, AppState], n: int) -> None:
    """Fan-out's follower paging (`enqueue_pages`, jobs not queued) of the author with the
    most followers, `n` times per variant, alternating: wall and server CPU per split."""
    if n <= 0:
        return
    conn = await asyncpg.connect(primary_url)
    try:
        author, followers = await conn.fetchrow(
            "SELECT followee_id, count(*) FROM follows GROUP BY 1 ORDER BY 2 DESC LIMIT 1"
        )
        post_id = await conn.fetchval("SELECT max(id) FROM posts WHERE author_id = $1", author)
    finally:
        await conn.close()

    async def nothing(function: str, *args: Any, job_id: str, lane: str) -> None:
        return None

    figures: dict[str, list[float]] = {name: [0.0, 0.0, 0.0, 0.0] for name in states}
    for round_ in range(4):
        order = list(states) if round_ % 2 == 0 else list(reversed(states))
        for name in order:
            fanout, f = states[name].fanout, figures[name]
            p0, s0, t0 = (
                server_cpu(pair, "primary"),
                server_cpu(pair, "standby"),
                time.perf_counter(),
            )
            for i in range(n // 4):
                _, paged = await fanout.enqueue_pages(
                    author, [(post_id, 0)], lanes.DEFAULT, f"bench:{i}", 0, nothing
                )
            f[0] += time.perf_counter() - t0
            f[1] += server_cpu(pair, "primary") - p0
            f[2] += server_cpu(pair, "standby") - s0
            f[3] += n // 4
    print(
        f"\nfollower paging: author with {followers} followers ({paged} active paged), {n} splits per variant"
    )
    print("| variant | ms per split | primary CPU ms/split | standby CPU ms/split |")
    print("| --- | ---: | ---: | ---: |")
    for name, f in figures.items():
        k = max(1.0, f[3])
        print(f"| {name} | {f[0] * 1000 / k:.2f} | {f[1] * 1000 / k:.3f} | {f[2] * 1000 / k:.3f} |")


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.viewers} random viewers x (1 first + up to {args.pages} next pages) x "
        f"{args.rounds} rounds; users {args.users}, posts {args.posts}"
    )
    print(
        "| variant | next pages | loop pages/s | next p50 ms | next p99 ms | primary CPU ms/page "
        "| standby CPU ms/page | client CPU ms/page |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = {}
    for name, r in results.items():
        n = max(1, r["pages"])
        row = {
            "rate": r["pages"] / r["wall"] if r["wall"] else 0.0,
            "p50": percentile(r["lat"], 0.5) * 1000,
            "p99": percentile(r["lat"], 0.99) * 1000,
            "primary": r["p"] * 1000 / n,
            "standby": r["s"] * 1000 / n,
            "client": r["c"] * 1000 / n,
        }
        rows[name] = row
        print(
            f"| {name} | {r['pages']} | {row['rate']:.0f} | {row['p50']:.2f} | {row['p99']:.2f} "
            f"| {row['primary']:.3f} | {row['standby']:.3f} | {row['client']:.3f} |"
        )
    a, b = rows["with replica"], rows["primary only"]
    print(
        "ratios with/without replica: "
        + ", ".join(
            f"{k} {a[k] / b[k]:.2f}" for k in ("rate", "p50", "p99", "primary", "client") if b[k]
        )
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=5000)
    parser.add_argument("--avg-following", type=float, default=40)
    parser.add_argument("--posts", type=int, default=100_000)
    parser.add_argument("--viewers", type=int, default=40)
    parser.add_argument("--pages", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--splits", type=int, default=200, help="follower pagings per variant")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
