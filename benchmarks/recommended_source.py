"""What the recommendation source and the two-rule filter cost per RANKED first page, on a
seeded network (issue 35, decision 0079):

    python -m benchmarks.recommended_source --db bench35 [--runs 200]

On the database NAME of DATABASE_URL's server (seeded by benchmarks/feed_wrk.py's
`--reuse-db NAME`: 100k users, 2M posts, 1M likes), for the heaviest viewer (most
followees) and a light one (~50): the recommendation source's query (app.feed.recommended) as
the read path sends it, bounded, and without the followee bound; then the ranking filter
(app.feed.rows `rank_rows`) over a first page's ~625 followed candidates, alone and with the
recommended ids as its second array (`rank_rows_rec`). Each statement prepared once, then
`--runs` executions; prints the median and p90 wall time per execution (client to server and
back: PostgreSQL's CPU plus one loopback round trip) and PostgreSQL's own execution time of
one EXPLAIN ANALYZE. Reads only."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import asyncpg

from app.config import Settings, asyncpg_url
from app.feed import recommended, rows


def _row(name: str, times: list[float]) -> str:
    times = sorted(times)
    p90 = times[int(len(times) * 0.9) - 1]
    return f"| {name} | {statistics.median(times) * 1000:.2f} | {p90 * 1000:.2f} |"


async def _timed(conn: asyncpg.Connection, sql: str, args: list[object], runs: int) -> list[float]:
    statement = await conn.prepare(sql)
    await statement.fetch(*args)  # warm
    found = []
    for _ in range(runs):
        start = time.perf_counter()
        await statement.fetch(*args)
        found.append(time.perf_counter() - start)
    return found


async def _explained(conn: asyncpg.Connection, sql: str, args: list[object]) -> str:
    plan = await conn.fetch("EXPLAIN (ANALYZE, FORMAT TEXT) " + sql, *args)
    return str(next(r[0] for r in plan if r[0].startswith("Execution Time")))


async def main(db: str, runs: int) -> None:
    settings = Settings()
    base = asyncpg_url(os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/x")
    url = base.rsplit("/", 1)[0] + "/" + db
    conn = await asyncpg.connect(url)
    heavy = await conn.fetchval(
        "SELECT follower_id FROM follows GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
    )
    light = await conn.fetchval(
        "SELECT follower_id FROM follows GROUP BY 1 HAVING count(*) BETWEEN 45 AND 55"
        " ORDER BY follower_id LIMIT 1"
    )
    since = recommended.since_id(settings.feed_recommended_window_seconds)
    print("| statement | median ms | p90 ms |\n| --- | --- | --- |")
    for name, viewer in (("heavy", heavy), ("light", light)):
        followees = await conn.fetchval(
            "SELECT count(*) FROM follows WHERE follower_id = $1", viewer
        )
        args = [
            viewer,
            since,
            settings.feed_recommended_likes_per_followee,
            settings.feed_source_recommended_max,
            settings.feed_recommended_followees,
        ]
        rec_ids = (await conn.fetchval(recommended._RECOMMENDED, *args)) or []
        label = f"{name} ({followees} followees, {len(rec_ids)} recommended)"
        print(
            _row(
                f"recommendation source, {label}",
                await _timed(conn, recommended._RECOMMENDED, args, runs),
            )
        )
        unbounded = [*args[:4], 1_000_000]
        print(
            _row(
                f"  without the followee bound, {name}",
                await _timed(conn, recommended._RECOMMENDED, unbounded, max(runs // 5, 5)),
            )
        )
        # A first page's followed candidates: the followees' newest 625 posts (as a timeline).
        followed = [
            r[0]
            for r in await conn.fetch(
                "SELECT p.id FROM follows f JOIN LATERAL (SELECT id FROM posts WHERE author_id ="
                " f.followee_id ORDER BY created_at DESC LIMIT 20) p ON true"
                " WHERE f.follower_id = $1 ORDER BY p.id DESC LIMIT 625",
                viewer,
            )
        ]
        plain = await _timed(
            conn, rows.filter_statements("local").rank_rows, [followed, viewer], runs
        )
        print(_row(f"filter (rank rows), {len(followed)} followed, {name}", plain))
        both = [*followed, *rec_ids]
        two = await _timed(
            conn, rows.filter_statements("local").rank_rows_rec, [both, viewer, list(rec_ids)], runs
        )
        print(_row(f"filter with the second rule, + {len(rec_ids)} recommended, {name}", two))
        why_ids = list(rec_ids[:4])
        why = await _timed(conn, recommended._WHY_SQL, [why_ids, viewer], runs)
        print(_row(f"why of {len(why_ids)} shown recommendations, {name}", why))
        print(
            f"|   EXPLAIN ANALYZE: source {await _explained(conn, recommended._RECOMMENDED, args)}; "
            f"filter {await _explained(conn, rows.filter_statements('local').rank_rows, [followed, viewer])}; "
            f"two rules {await _explained(conn, rows.filter_statements('local').rank_rows_rec, [both, viewer, list(rec_ids)])} | | |"
        )
    await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--runs", type=int, default=200)
    options = parser.parse_args()
    asyncio.run(main(options.db, options.runs))
