"""What the regional clause costs the feed filter (decision 0088): a RANKED first page's
filter (`rank_rows`, ~600 candidates) and a page's rows (`page_rows`, 40 candidates) judged
in a region where 0.5% of the posts are restricted, against the same statements without the
clause, in interleaved rounds on one server (EXPLAIN ANALYZE: server time and buffers).

    python -m benchmarks.regional_filter POSTGRES_URL [--posts 300000] [--rounds 30]

Makes (and drops) a database of its own beside the one the URL names; needs migrations
(alembic) importable from the project root.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from app.config import PROJECT_ROOT
from app.feed.rows import filter_statements
from app.posts.visibility import allowed_in_region_sql

REGION = "eu"


def _db_url(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


async def _seed(conn: asyncpg.Connection, posts: int) -> tuple[int, list[int], list[int]]:
    users = 20_000
    await conn.execute(
        "INSERT INTO users (handle, password_hash, display_name, last_active_at)"
        " SELECT 'u' || g, '!', 'u' || g, now() FROM generate_series(1, $1) g",
        users,
    )
    viewer = 1
    # The viewer follows 600 authors; posts spread over every author, newest ids last.
    await conn.execute(
        "INSERT INTO follows (follower_id, followee_id) SELECT 1, g FROM generate_series(2, 601) g"
    )
    await conn.execute(
        """
        INSERT INTO posts (id, author_id, created_at, body, visibility)
        SELECT (1000000 + g)::bigint << 12, 1 + (g::bigint * 7919) % $2, now() - (($1 - g) || ' s')::interval,
               repeat('x', 120), CASE WHEN g % 10 = 0 THEN 'followers' ELSE 'public' END
        FROM generate_series(1, $1) g
        """,
        posts,
        users,
    )
    # 0.5% of the posts restricted, most in REGION.
    await conn.execute(
        "UPDATE posts SET restricted_regions = CASE WHEN id % 3 = 0 THEN ARRAY['us']"
        " ELSE ARRAY['eu'] END WHERE (id >> 12) % 200 = 0"
    )
    await conn.execute("ANALYZE")
    candidates = [
        r[0]
        for r in await conn.fetch(
            "SELECT id FROM posts WHERE author_id BETWEEN 2 AND 601 ORDER BY id DESC LIMIT 600"
        )
    ]
    return viewer, candidates, candidates[:40]


async def _explain(conn: asyncpg.Connection, sql: str, args: list[object]) -> tuple[float, int]:
    plan = await conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
    top = json.loads(plan)[0]
    node = top["Plan"]
    return top["Execution Time"], node.get("Shared Hit Blocks", 0) + node.get(
        "Shared Read Blocks", 0
    )


async def run(url: str, posts: int, rounds: int) -> None:
    name = f"regional_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        target = _db_url(url, name)
        await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "alembic", "upgrade", "head"],
            cwd=PROJECT_ROOT,
            env={**os.environ, "DATABASE_URL": target},
            check=True,
            capture_output=True,
        )
        conn = await asyncpg.connect(target)
        try:
            viewer, many, few = await _seed(conn, posts)
            clause = f" AND {allowed_in_region_sql('p', REGION)}"
            statements = filter_statements(REGION)
            cases = {
                "rank_rows (600 candidates)": (statements.rank_rows, [many, viewer]),
                "page_rows (40 candidates)": (statements.page_rows, [few, viewer]),
            }
            for label, (with_clause, args) in cases.items():
                assert clause in with_clause
                without = with_clause.replace(clause, "")
                timings: dict[str, list[float]] = {"with": [], "without": []}
                buffers: dict[str, int] = {}
                for _ in range(3):  # warm both
                    await _explain(conn, with_clause, args)
                    await _explain(conn, without, args)
                for i in range(rounds):  # interleaved, alternating which goes first
                    order = [("with", with_clause), ("without", without)]
                    for kind, sql in order if i % 2 == 0 else order[::-1]:
                        ms, blocks = await _explain(conn, sql, args)
                        timings[kind].append(ms)
                        buffers[kind] = blocks
                w, wo = statistics.median(timings["with"]), statistics.median(timings["without"])
                print(
                    f"| {label} | {wo:.3f} ms, {buffers['without']} buffers"
                    f" | {w:.3f} ms, {buffers['with']} buffers | {w / wo:.3f} |"
                )
        finally:
            await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.regional_filter")
    parser.add_argument("url")
    parser.add_argument("--posts", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    print("| statement | without the clause (median) | with it | ratio |")
    print("| --- | --- | --- | --- |")
    asyncio.run(run(args.url, args.posts, args.rounds))


if __name__ == "__main__":
    main()
