"""One split's follower read alone (issue 24, decision 0057): `FanoutService.enqueue_pages`
for a post to N active followers, its jobs queued into a list (no ARQ, no workers), on a
scratch database: what the split costs without the fan-out's other processes around it.

    DATABASE_URL=... REDIS_URL=redis://127.0.0.1:6416/0 python -m benchmarks.split_read \\
        [--followers 50000] [--rounds 9] [--redis-db 8] [--db-prefix bench_split]

Prints the wall time from the call to its return (every group queued) and to the first group
queued: median and best of the rounds (a first round, warming the pool, not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from benchmarks.common import scratch
from benchmarks.fanout_path import BENCH_ENV, seed


async def measure(args: argparse.Namespace) -> None:
    async with scratch(args.db_prefix, args.redis_db) as servers:
        author = await seed(servers.dsn, args.followers)
        os.environ.update({**servers.env(), **BENCH_ENV})
        from app.fanout import lanes
        from app.state import create_state

        state = create_state(pool_size=3)
        done: list[float] = []
        head: list[float] = []
        loads = [os.getloadavg()[0]]
        try:
            for r in range(args.rounds + 1):
                first: list[float] = []
                start = time.perf_counter()

                async def enqueue(
                    function: str,
                    *a: Any,
                    job_id: str,
                    lane: str,
                    first: list[float] = first,
                    start: float = start,
                ) -> None:
                    if not first:
                        first.append(time.perf_counter() - start)

                _, count = await state.fanout.enqueue_pages(
                    author, [[r + 1, 0]], lanes.DEFAULT, f"fb:{r}", 0, enqueue
                )
                spent = time.perf_counter() - start
                assert count == args.followers, count
                if r:  # the first round warms the pool and the caches
                    done.append(spent * 1e3)
                    head.append(first[0] * 1e3)
            loads.append(os.getloadavg()[0])
        finally:
            await state.close()
        print(
            f"split of {args.followers:,} active followers, {args.rounds} rounds "
            f"(load {min(loads):.1f}-{max(loads):.1f}): all queued median "
            f"{statistics.median(done):.1f} ms, best {min(done):.1f}; first queued median "
            f"{statistics.median(head):.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--followers", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--redis-db", type=int, default=8)
    parser.add_argument("--db-prefix", default="bench_split")
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
