"""The read path's SELECT through `Reads` (app.feed.rows: asyncpg's connection from the
engine's pool) against the way it ran before decision 0052 (SQLAlchemy's exec_driver_sql on
an autocommit Connection of the same engine), in process, client CPU per query, interleaved.

    DATABASE_URL=... python -m benchmarks.feed_reads [--queries 2000] [--rounds 5]

The statement returns 25 rows of the shapes a page's filter returns (bigint, text,
timestamptz, boolean), so the figure is the client's per-query and per-row cost, not the
server's. Both ways share one engine and pool, as the product does.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from app.config import Settings
from app.db.engine import make_engine
from app.feed.rows import Reads

STATEMENT = """
    SELECT g::bigint, g * 2, 'post body ' || g, '2026-12-01 12:00+00'::timestamptz + g * interval '1 minute', g % 3 = 0, g::bigint % 7, 'public'
    FROM generate_series(1, $1::int) g WHERE $2::bigint IS NOT NULL
"""


async def run(queries: int, rounds: int) -> None:
    engine = make_engine(Settings(), pool_size=4)
    reads = Reads(engine)
    autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def before(*args: Any) -> Sequence[Sequence[Any]]:
        async with autocommit.connect() as conn:
            return (await conn.exec_driver_sql(STATEMENT, args)).all()

    async def after(*args: Any) -> Sequence[Sequence[Any]]:
        return await reads.all(STATEMENT, *args)

    ways: dict[str, Callable[..., Awaitable[Sequence[Sequence[Any]]]]] = {
        "sqlalchemy": before,
        "driver": after,
    }
    answers = [[tuple(r) for r in await way(25, 1)] for way in ways.values()]
    assert answers[0] == answers[1]
    timings: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(rounds):
        for key, way in ways.items():  # interleaved: drift hits both
            started = time.process_time()
            for _ in range(queries):
                await way(25, 1)
            timings[key].append((time.process_time() - started) / queries * 1e6)
    await engine.dispose()
    medians = {k: statistics.median(v) for k, v in timings.items()}
    for key, values in timings.items():
        rounds_ = ", ".join(f"{v:.0f}" for v in values)
        print(f"{key:10} {medians[key]:7.1f} µs per query (client CPU; rounds: {rounds_})")
    print(f"driver / sqlalchemy: {medians['driver'] / medians['sqlalchemy']:.2f}x the CPU")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    asyncio.run(run(args.queries, args.rounds))


if __name__ == "__main__":
    main()
