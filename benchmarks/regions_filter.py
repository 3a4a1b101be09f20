"""The read rules' cost of `proven_sql` (decision 0087) in a single-region database: the
home-feed filter over 200 candidates with `alive_sql` (before) and `proven_sql` (after),
same data, same connection, interleaved rounds.

    python -m benchmarks.regions_filter [--rounds 20] [--queries 100]

Starts a fresh PostgreSQL on loopback (devtools.replica's primary; its standby idles),
migrates it, seeds 2,000 users, 300 follows of viewer 1 and 30,000 posts, and times the two
prepared statements alternately (the order flips every round, so drift of a shared machine
hits both). Prints µs per query per round, the medians and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import asyncpg

from app.posts import visibility
from devtools.provision import migrate
from devtools.replica import replica_pair

DB = "regions_bench"
QUERY = "SELECT p.id, p.body FROM posts p WHERE p.id = ANY($2::bigint[]) AND {}"


async def run(rounds: int, queries: int) -> None:
    async with replica_pair() as pair:
        url = await pair.create_database(DB)
        await asyncio.to_thread(migrate, url)
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(
                "INSERT INTO users (handle, password_hash, display_name) "
                "SELECT 'u' || g, 'x', 'u' FROM generate_series(1, 2000) g"
            )
            await conn.execute("INSERT INTO follows SELECT 1, g FROM generate_series(2, 300) g")
            await conn.execute(
                "INSERT INTO posts (id, author_id, created_at, body) SELECT "
                "next_post_id(now()), 2 + (g % 1500), now(), 'b' FROM generate_series(1, 30000) g"
            )
            ids = [
                row[0]
                for row in await conn.fetch(
                    "SELECT id FROM posts WHERE author_id < 300 ORDER BY id DESC LIMIT 200"
                )
            ]
            after = visibility.home_feed_sql("p", "$1")
            before = after.replace(visibility.proven_sql("p"), visibility.alive_sql("p"))
            statements = {
                "alive_sql": await conn.prepare(QUERY.format(before)),
                "proven_sql": await conn.prepare(QUERY.format(after)),
            }
            for statement in statements.values():  # warm both plans and caches
                for _ in range(50):
                    await statement.fetch(1, ids)
            times: dict[str, list[float]] = {name: [] for name in statements}
            for r in range(rounds):
                order = list(statements) if r % 2 == 0 else list(reversed(statements))
                for name in order:
                    started = time.perf_counter()
                    for _ in range(queries):
                        await statements[name].fetch(1, ids)
                    times[name].append((time.perf_counter() - started) / queries * 1e6)
            for name, values in times.items():
                rounded = [round(v) for v in values]
                print(
                    f"{name}: µs/query per round {rounded}, median {statistics.median(values):.0f}"
                )
            ratio = statistics.median(times["proven_sql"]) / statistics.median(times["alive_sql"])
            print(f"ratio proven_sql / alive_sql (medians): {ratio:.3f}")
        finally:
            await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.queries))


if __name__ == "__main__":
    main()
