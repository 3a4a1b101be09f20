"""Feed pages with the filter on the primary (before) and on replicas behind the narrowing
watermarks (after: one replica, and two), same data, same run (decisions 0043, 0086).

    python -m benchmarks.replica_pages [--users 5000 --avg-following 40 --posts 100000]
        [--viewers 40] [--pages 6] [--rounds 3] [--splits 0]

Starts a fresh primary and two streaming standbys on loopback (devtools.replica), seeds the
primary with devtools.seed's seed_bulk, and builds three composition roots on it, all with
both standbys configured: "before" with DATABASE_REPLICA_FEED_PAGES=0 (the filter and
hydration on the primary: the code path up to issue 37), "1 replica" (DATABASE_REPLICA_URLS =
the first standby) and "2 replicas" (both). Per round and variant (the order rotating, so
drift of the shared machine hits each alike): every viewer reads a RANKED first page, then
every viewer --pages next pages of its session (`FeedService.page`, no HTTP). The replicas
are current (no writes run meanwhile: every mark is older than their replay). Prints per
variant and page kind (first, next, all): pages, p50 per page, and CPU per page of the
primary's and each standby's server processes and of this client; then the after/before
ratios of the primary's CPU per page. Redis: REDIS_URL's db (never db 0; flushed first).
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
from app.db.replica import REPLICA_READS
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


VARIANTS = ("before", "1 replica", "2 replicas")
SERVERS = ("primary", "standby", "standby2")


def snapshot(pair: ReplicaPair) -> dict[str, float]:
    """CPU seconds so far of each server's process tree and of this client."""
    cpu = {which: server_cpu(pair, which) for which in SERVERS}
    cpu["client"] = time.process_time()
    return cpu


async def run(args: argparse.Namespace) -> None:
    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/5")
    if redis_url.rstrip("/").endswith("/0"):
        raise SystemExit("REDIS_URL must name a db other than 0 (it is flushed)")
    async with replica_pair(standbys=2) as pair:
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
        both = ",".join(pair.url(s, DB) for s in pair.standbys)
        one = pair.url("standby", DB)
        states = {
            "before": create_state(
                Settings(**base, database_replica_urls=both, database_replica_feed_pages=False),
                pool_size=5,
            ),
            "1 replica": create_state(Settings(**base, database_replica_urls=one), pool_size=5),
            "2 replicas": create_state(Settings(**base, database_replica_urls=both), pool_size=5),
        }
        first = states["before"]
        await first.redis.flushdb()
        for state in states.values():  # no narrowing has happened: the marks are known, empty
            assert state.watermarks is not None
            await state.watermarks.clear()
        for viewer in viewers:  # timelines once; the roots share Redis
            await first.fanout.rebuild_timeline(viewer)
        kinds = ("first", "next")
        results: dict[str, dict[str, dict[str, Any]]] = {
            name: {k: {"lat": [], "pages": 0, "cpu": dict.fromkeys((*SERVERS, "client"), 0.0)}
                   for k in kinds}
            for name in states
        }  # fmt: skip
        try:
            await splits(pair, primary_url, states, args.splits)
            for state in states.values():  # warm-up: pools, statement caches
                for viewer in viewers[:5]:
                    await scroll_pages(state, viewer, 2)
            for round_ in range(args.rounds):
                k = round_ % len(VARIANTS)
                for name in VARIANTS[k:] + VARIANTS[:k]:
                    state = states[name]
                    state.forget_local()
                    cursors = await timed(pair, results[name]["first"], state, viewers, None)
                    for _ in range(args.pages):
                        cursors = await timed(pair, results[name]["next"], state, viewers, cursors)
        finally:
            for state in states.values():
                await state.close()
        report(results, args)
        counts = {
            f"{s.name}{s.labels}": s.value
            for metric in (REPLICA_READS,)
            for s in metric.collect()[0].samples
            if s.name.endswith("_total")
        }
        print("replica router counters (whole run):", counts)


async def scroll_pages(state: AppState, viewer: int, pages: int) -> None:
    page = await state.feed.page(viewer, FeedMode.RANKED, 20, None)
    for _ in range(pages):
        if not page.has_next or not page.rows:
            return
        page = await state.feed.page(viewer, FeedMode.RANKED, 20, page.rows[-1][1])


async def timed(
    pair: ReplicaPair,
    r: dict[str, Any],
    state: AppState,
    viewers: Sequence[int],
    cursors: dict[int, Any] | None,
) -> dict[int, Any]:
    """Each viewer's first page (`cursors` None) or next page (from its cursor), one at a
    time: their latencies and the CPU they cost into `r`; the cursors of pages that go on."""
    following: dict[int, Any] = {}
    before = snapshot(pair)
    for viewer in viewers:
        if cursors is not None and viewer not in cursors:
            continue
        cursor = None if cursors is None else cursors[viewer]
        started = time.perf_counter()
        page = await state.feed.page(viewer, FeedMode.RANKED, 20, cursor)
        r["lat"].append(time.perf_counter() - started)
        r["pages"] += 1
        if page.has_next and page.rows:
            following[viewer] = page.rows[-1][1]
    after = snapshot(pair)
    for key in r["cpu"]:
        r["cpu"][key] += after[key] - before[key]
    return following


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


def report(results: dict[str, dict[str, dict[str, Any]]], args: argparse.Namespace) -> None:
    print(
        f"\n{args.viewers} random viewers x (1 first + up to {args.pages} next pages) x "
        f"{args.rounds} rounds; users {args.users}, posts {args.posts}"
    )
    print(
        "| variant | pages | kind | p50 ms | primary CPU ms/page | standby CPU ms/page "
        "| standby2 CPU ms/page | client CPU ms/page |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    primary: dict[tuple[str, str], float] = {}
    for name, by_kind in results.items():
        merged = {
            "lat": by_kind["first"]["lat"] + by_kind["next"]["lat"],
            "pages": by_kind["first"]["pages"] + by_kind["next"]["pages"],
            "cpu": {
                k: by_kind["first"]["cpu"][k] + by_kind["next"]["cpu"][k]
                for k in by_kind["first"]["cpu"]
            },
        }
        for kind, r in (*by_kind.items(), ("all", merged)):
            n = max(1, r["pages"])
            cpu = {k: v * 1000 / n for k, v in r["cpu"].items()}
            primary[(name, kind)] = cpu["primary"]
            print(
                f"| {name} | {r['pages']} | {kind} | {percentile(r['lat'], 0.5) * 1000:.2f} "
                f"| {cpu['primary']:.3f} | {cpu['standby']:.3f} | {cpu['standby2']:.3f} "
                f"| {cpu['client']:.3f} |"
            )
    for name in VARIANTS[1:]:
        print(
            f"primary CPU per page, {name} / before: "
            + ", ".join(
                f"{kind} {primary[(name, kind)] / primary[('before', kind)]:.3f}"
                for kind in ("first", "next", "all")
                if primary[("before", kind)]
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
    parser.add_argument("--splits", type=int, default=0, help="follower pagings per variant")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
