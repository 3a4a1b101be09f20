"""The feed service's own CPU per first page, in process: no HTTP, no GraphQL, one page at a
time, so the figure is what `FeedService.page` and the drivers under it (SQLAlchemy +
asyncpg, redis-py) cost this process, whatever else runs on the machine.

    python -m benchmarks.first_page_cpu --db NAME [--redis-url URL] [--pages 400]
        [--rounds 3] [--modes ranked,chrono,ranked-noreuse] [--classes heavy,random]

NAME: a database seeded as feed_wrk seeds it (`--reuse-db NAME` there). URL: a Redis db of
its own (default redis://127.0.0.1:6412/0, a private redis-server; FLUSHED at the start).
Viewers as feed_wrk picks them: every user following 1,000-2,000 accounts ("heavy") and
--viewers random active users. Each viewer's timeline is rebuilt and every mode read once
per viewer first (not measured). Then per round, mode and class: --pages first pages, the
viewers in turn, and the process's CPU time (time.process_time) per page. `ranked-noreuse`
is RANKED with FEED_SESSION_REUSE_SECONDS=0 (every page filters, ranks and freezes).

Made to compare two trees back to back: run it from each (`cd TREE && python -m
benchmarks.first_page_cpu ...`, the same venv) in turn, a few times, and compare the
figures; the machine's other load moves the rates of wrk runs by 2-5x, this much less.
Prints one line per (round, mode, class) and the median per (mode, class).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from collections.abc import Sequence

import asyncpg

MODES = ("ranked", "chrono", "ranked-noreuse")


async def _viewers(dsn: str, n: int, seed: int) -> dict[str, list[int]]:
    conn = await asyncpg.connect(dsn)
    try:
        active = [
            r[0]
            for r in await conn.fetch(
                "SELECT id FROM users WHERE following_count >= 1 ORDER BY id LIMIT 20000"
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


async def run(args: argparse.Namespace) -> None:
    base = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    dsn = base.rsplit("/", 1)[0] + "/" + args.db
    os.environ["DATABASE_URL"] = dsn
    os.environ["REDIS_URL"] = args.redis_url
    from app.config import Settings
    from app.feed.modes import FeedMode
    from app.state import create_state

    settings = Settings()
    states = {
        "ranked": create_state(settings, pool_size=4),
        "chrono": None,
        "ranked-noreuse": create_state(
            settings.model_copy(update={"feed_session_reuse_seconds": 0}), pool_size=4
        ),
    }
    states["chrono"] = states["ranked"]
    modes = {
        "ranked": FeedMode.RANKED,
        "chrono": FeedMode.CHRONOLOGICAL,
        "ranked-noreuse": FeedMode.RANKED,
    }
    wanted = [m for m in args.modes.split(",") if m]
    classes = [c for c in args.classes.split(",") if c]
    viewers = await _viewers(dsn, args.viewers, args.seed)
    state = states["ranked"]
    assert state is not None
    await state.redis.flushdb()
    try:
        everyone = [v for c in classes for v in viewers[c]]
        for _ in range(3):  # timelines rebuilt on the first read, then read as in steady state
            for mode in wanted:
                s = states[mode]
                assert s is not None
                for viewer in everyone:
                    await s.feed.page(viewer, modes[mode], 20, None)
            await asyncio.sleep(1.0)
        results: dict[tuple[str, str], list[float]] = {}
        for r in range(args.rounds):
            for mode in wanted:
                s = states[mode]
                assert s is not None
                for cls in classes:
                    ids = viewers[cls]
                    started = time.process_time()
                    for i in range(args.pages):
                        await s.feed.page(ids[i % len(ids)], modes[mode], 20, None)
                    per_page = (time.process_time() - started) / args.pages * 1e6
                    results.setdefault((mode, cls), []).append(per_page)
                    print(f"round {r + 1} {mode:15} {cls:7} {per_page:7.0f} us CPU per page")
        print()
        for (mode, cls), figures in results.items():
            print(f"median {mode:15} {cls:7} {statistics.median(figures):7.0f} us CPU per page")
    finally:
        for s in {id(x): x for x in states.values() if x is not None}.values():
            await s.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6412/0")
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--viewers", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--classes", default="heavy,random")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
