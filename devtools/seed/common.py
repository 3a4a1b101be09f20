"""What both seeds share: the connection, the empty-or-force check, counts derived from the rows,
the final checks and statistics, and the per-phase progress bars."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg
from tqdm import tqdm

from app.config import asyncpg_url
from app.db.models import FANOUT_PULL, FANOUT_PUSH

# Every table the seeder may fill; TRUNCATE ... CASCADE empties them together with --force.
SEEDED_TABLES = (
    "users",
    "follows",
    "blocks",
    "posts",
    "likes",
    "comments",
    "outbox",
    "idempotency_keys",
)


class SeedError(RuntimeError):
    """A seed cannot run as asked (non-empty database, schema missing, bad arguments)."""


async def connect(dsn: str) -> asyncpg.Connection:
    return await asyncpg.connect(
        asyncpg_url(dsn),
        server_settings={
            "application_name": "hybridfeed-seed",
            # Bigger sorts/hashes in memory for the set-based steps; session-local only.
            "work_mem": "128MB",
            "maintenance_work_mem": "256MB",
        },
    )


async def skip_fk_triggers(conn: asyncpg.Connection) -> bool:
    """Turn off foreign-key triggers for this session when allowed (superuser); True if so.

    Row-by-row RI checks are most of the cost of loading millions of rows (5M follows: ~80 s
    with them, ~30 s without). The seeder builds ids that exist by construction and verifies
    every reference with set-based anti-joins before committing (check_references), so the
    guarantee holds either way. Without the privilege the checks just stay on.
    """
    try:
        await conn.execute("SET session_replication_role = replica")
    except asyncpg.InsufficientPrivilegeError:
        return False
    return True


async def check_references(conn: asyncpg.Connection) -> None:
    """Every foreign key of the seeded rows resolves: one hash anti-join per reference."""
    checks = {
        "follows.follower_id": "follows f WHERE NOT EXISTS "
        "(SELECT 1 FROM users u WHERE u.id = f.follower_id)",
        "follows.followee_id": "follows f WHERE NOT EXISTS "
        "(SELECT 1 FROM users u WHERE u.id = f.followee_id)",
        "posts.author_id": "posts p WHERE NOT EXISTS "
        "(SELECT 1 FROM users u WHERE u.id = p.author_id)",
        "likes.post_id": "likes l WHERE NOT EXISTS (SELECT 1 FROM posts p WHERE p.id = l.post_id)",
        "likes.user_id": "likes l WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = l.user_id)",
        "comments.post_id": "comments c WHERE NOT EXISTS "
        "(SELECT 1 FROM posts p WHERE p.id = c.post_id)",
        "comments.author_id": "comments c WHERE NOT EXISTS "
        "(SELECT 1 FROM users u WHERE u.id = c.author_id)",
    }
    for name, query in checks.items():
        if await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {query})"):
            raise SeedError(f"seed bug: dangling reference in {name}; nothing was committed")


async def prepare(conn: asyncpg.Connection, force: bool) -> bool:
    """Check the schema exists and the database is empty; with force, empty it. True if it was."""
    if await conn.fetchval("SELECT to_regclass('public.users') IS NULL"):
        raise SeedError("the schema is missing: run `alembic upgrade head` first")
    non_empty = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM users) OR EXISTS (SELECT 1 FROM outbox)"
    )
    if non_empty:
        if not force:
            raise SeedError("the database already has users; pass --force to TRUNCATE and reseed")
        await conn.execute(f"TRUNCATE {', '.join(SEEDED_TABLES)} RESTART IDENTITY CASCADE")
    return not non_empty


async def refresh_user_counts(conn: asyncpg.Connection, pull_threshold: int) -> None:
    """Derive follower/following counts and fan-out mode from the follows rows themselves.

    Authors at/above the pull threshold start in PULL with mode version 1, as if they had
    switched once; everyone else stays PUSH at version 0 (the column default).
    """
    await conn.execute(
        """
        WITH fr AS (SELECT followee_id AS id, count(*) AS n FROM follows GROUP BY 1),
             fg AS (SELECT follower_id AS id, count(*) AS n FROM follows GROUP BY 1),
             c AS (
                SELECT u.id, coalesce(fr.n, 0) AS followers, coalesce(fg.n, 0) AS following,
                       (SELECT max(p.created_at) FROM posts p WHERE p.author_id = u.id) AS posted
                FROM users u LEFT JOIN fr ON fr.id = u.id LEFT JOIN fg ON fg.id = u.id
             )
        UPDATE users u
        SET follower_count = c.followers,
            following_count = c.following,
            fanout_mode = CASE WHEN c.followers >= $1::int THEN $2::smallint
                               ELSE $3::smallint END,
            fanout_mode_version = CASE WHEN c.followers >= $1::int THEN 1 ELSE 0 END,
            -- Whoever posted was around at that moment (greatest() skips NULLs).
            last_active_at = greatest(u.last_active_at, c.posted)
        FROM c WHERE c.id = u.id
        """,
        pull_threshold,
        FANOUT_PULL,
        FANOUT_PUSH,
    )


async def refresh_post_counts(conn: asyncpg.Connection) -> None:
    """like_count/comment_count from the likes and comments rows, touching only engaged posts."""
    await conn.execute(
        """
        UPDATE posts p SET like_count = c.likes, comment_count = c.comments
        FROM (
            SELECT post_id, sum(l)::int AS likes, sum(k)::int AS comments
            FROM (SELECT post_id, 1 AS l, 0 AS k FROM likes
                  UNION ALL SELECT post_id, 0, 1 FROM comments) x
            GROUP BY post_id
        ) c
        WHERE p.id = c.post_id
        """
    )


# The users columns a seed's COPY writes, in the order its records hold them.
USER_COLUMNS = ("id", "handle", "password_hash", "display_name", "created_at", "last_active_at")


async def sync_user_sequence(conn: asyncpg.Connection) -> None:
    """Explicit ids were COPYed: move the identity past them so sign-ups do not collide."""
    await conn.execute(
        "SELECT setval(pg_get_serial_sequence('users', 'id'),"
        " greatest((SELECT max(id) FROM users), 1))"
    )


async def table_counts(conn: asyncpg.Connection) -> dict[str, Any]:
    row = await conn.fetchrow(
        """
        SELECT (SELECT count(*) FROM users) AS users,
               (SELECT count(*) FROM follows) AS follows,
               (SELECT count(*) FROM posts) AS posts,
               (SELECT count(*) FROM likes) AS likes,
               (SELECT count(*) FROM comments) AS comments,
               (SELECT count(*) FROM users WHERE fanout_mode = $1) AS pull_authors,
               (SELECT coalesce(max(follower_count), 0) FROM users) AS max_followers
        """,
        FANOUT_PULL,
    )
    return dict(row)


async def vacuum_analyze(conn: asyncpg.Connection) -> None:
    """Fresh statistics and visibility map, so the first benchmark queries get real plans."""
    for table in ("users", "follows", "posts", "likes", "comments"):
        await conn.execute(f"VACUUM (ANALYZE) {table}")


class Phases:
    """Per-phase tqdm bars plus wall-clock timings for the stats dict."""

    def __init__(self, progress: bool) -> None:
        self.progress = progress
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str, total: int = 1, unit: str = "step") -> Iterator[tqdm]:
        start = time.perf_counter()
        bar = tqdm(
            total=total,
            desc=f"{name:<10}",
            unit=unit,
            unit_scale=True,
            disable=not self.progress,
            dynamic_ncols=True,
            leave=True,
        )
        try:
            yield bar
            bar.n = bar.total if bar.total is not None else bar.n
            bar.refresh()
        finally:
            bar.close()
            self.seconds[name] = round(time.perf_counter() - start, 2)
