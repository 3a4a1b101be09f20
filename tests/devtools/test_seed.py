"""The seeder's data must look like the real thing: the benchmarks and demo trust its shape.

Each test module run creates throwaway databases on the DATABASE_URL server (or the local
default), migrates them with Alembic exactly like production, and drops them afterwards.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from app.config import asyncpg_url, get_settings
from app.db.models import FANOUT_PULL, FANOUT_PUSH
from app.passwords import verify_password
from app.posts.ids import EPOCH_MS, SEQUENCE_BITS
from devtools.seed import BULK_PASSWORD, DEMO_PASSWORD, SeedError, seed_bulk, seed_demo
from tests.helpers import cli, readme_bulk_seed_command

ADMIN_URL = asyncpg_url(
    os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
)

USERS, AVG_FOLLOWING, POSTS = 2_000, 20, 10_000
# Small network, so a threshold that a few dozen authors reach (the real one is 10,000).
PULL_THRESHOLD = 150


def _database_url(name: str) -> str:
    parts = urlsplit(ADMIN_URL)
    return urlunsplit(parts._replace(path=f"/{name}"))


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """A new, migrated database; dropped on exit even if the test failed."""
    try:
        admin = await asyncpg.connect(ADMIN_URL)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.skip(f"no PostgreSQL at {ADMIN_URL}: {exc}")
    name = f"seed_test_{uuid.uuid4().hex[:12]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = _database_url(name)
        await cli("alembic", "upgrade", "head", env={"DATABASE_URL": url})
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(scope="module")
async def bulk_db() -> AsyncIterator[tuple[str, dict]]:
    async with fresh_database() as url:
        stats = await seed_bulk(
            url,
            USERS,
            AVG_FOLLOWING,
            POSTS,
            days=30,
            active_fraction=0.6,
            seed=42,
            pull_threshold=PULL_THRESHOLD,
            progress=False,
        )
        yield url, stats


@pytest.fixture
async def conn(bulk_db: tuple[str, dict]) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(bulk_db[0])
    try:
        yield connection
    finally:
        await connection.close()


async def test_stats_match_rows(bulk_db: tuple[str, dict], conn: asyncpg.Connection) -> None:
    _, stats = bulk_db
    assert stats["users"] == await conn.fetchval("SELECT count(*) FROM users") == USERS
    assert stats["posts"] == await conn.fetchval("SELECT count(*) FROM posts") == POSTS
    follows = await conn.fetchval("SELECT count(*) FROM follows")
    assert stats["follows"] == follows
    assert 0.8 * USERS * AVG_FOLLOWING <= follows <= 1.2 * USERS * AVG_FOLLOWING
    likes = await conn.fetchval("SELECT count(*) FROM likes")
    comments = await conn.fetchval("SELECT count(*) FROM comments")
    assert stats["likes"] == likes and stats["comments"] == comments
    # Defaults: ~0.5 likes and ~0.1 comments per post.
    assert 0.3 * POSTS <= likes <= 0.7 * POSTS
    assert 0.05 * POSTS <= comments <= 0.15 * POSTS


COUNTS_OFF = {
    "users' follower and following counts": """
        SELECT count(*) FROM users u
        WHERE u.follower_count <> (SELECT count(*) FROM follows f WHERE f.followee_id = u.id)
           OR u.following_count <> (SELECT count(*) FROM follows f WHERE f.follower_id = u.id)
        """,
    "posts' like and comment counts": """
        SELECT count(*) FROM posts p
        WHERE p.like_count <> (SELECT count(*) FROM likes l WHERE l.post_id = p.id)
           OR p.comment_count <> (SELECT count(*) FROM comments c WHERE c.post_id = p.id)
        """,
}


@pytest.mark.parametrize("counts", list(COUNTS_OFF))
async def test_stored_counts_match_rows(conn: asyncpg.Connection, counts: str) -> None:
    """Seeded denormalized counts agree with the rows they count (rows off: none)."""
    assert await conn.fetchval(COUNTS_OFF[counts]) == 0


async def test_engagement_comes_from_active_followers(conn: asyncpg.Connection) -> None:
    """Likes/comments only by followers of the author, on posts they may see."""
    for table, user_col, author_col in (
        ("likes", "user_id", "author_id"),
        ("comments", "author_id", "post_author_id"),
    ):
        bad = await conn.fetchval(
            f"""
            SELECT count(*) FROM {table} e JOIN posts p ON p.id = e.post_id
            WHERE e.{author_col} <> p.author_id OR p.visibility = 'private'
               OR NOT EXISTS (SELECT 1 FROM follows f
                              WHERE f.follower_id = e.{user_col} AND f.followee_id = p.author_id)
               OR e.created_at < p.created_at
            """
        )
        assert bad == 0, table


async def test_no_self_follows_or_duplicates(conn: asyncpg.Connection) -> None:
    assert await conn.fetchval("SELECT count(*) FROM follows WHERE follower_id = followee_id") == 0
    total, distinct = await conn.fetchrow(
        "SELECT count(*), count(DISTINCT (follower_id, followee_id)) FROM follows"
    )
    assert total == distinct


async def test_follower_distribution_is_heavy_tailed(conn: asyncpg.Connection) -> None:
    counts = [r[0] for r in await conn.fetch("SELECT follower_count FROM users ORDER BY 1 DESC")]
    top = counts[: len(counts) // 100]
    share = sum(top) / sum(counts)
    median = counts[len(counts) // 2]
    assert share >= 0.2, share  # the top 1% hold a fifth or more of all follows
    assert counts[0] >= 20 * max(median, 1), (counts[0], median)
    assert counts[0] >= 0.3 * USERS  # the biggest author reaches a large part of the network


async def test_pull_mode_exactly_at_threshold(
    bulk_db: tuple[str, dict], conn: asyncpg.Connection
) -> None:
    rows = await conn.fetch("SELECT follower_count, fanout_mode, fanout_mode_version FROM users")
    pull = [r for r in rows if r["fanout_mode"] == FANOUT_PULL]
    assert pull, "expected some authors at/above the test threshold"
    assert bulk_db[1]["pull_authors"] == len(pull)
    for r in rows:
        big = r["follower_count"] >= PULL_THRESHOLD
        assert r["fanout_mode"] == (FANOUT_PULL if big else FANOUT_PUSH)
        assert r["fanout_mode_version"] == (1 if big else 0)


async def test_post_ids_encode_created_at(conn: asyncpg.Connection) -> None:
    mismatched = await conn.fetchval(
        "SELECT count(*) FROM posts"
        " WHERE (id >> 22) + 1420070400000 <> floor(extract(epoch FROM created_at) * 1000)"
        "    OR length(id::text) <> 19"
    )
    assert mismatched == 0
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    now = datetime.now(UTC)
    for post_id, created_at in await conn.fetch(
        "SELECT id, created_at FROM posts TABLESAMPLE SYSTEM (10)"
    ):
        assert len(str(post_id)) == 19
        ms = (created_at - epoch) // timedelta(milliseconds=1)
        assert (post_id >> SEQUENCE_BITS) + EPOCH_MS == ms
        assert created_at.microsecond % 1000 == 0  # ms precision, like the Redis score
        assert now - timedelta(days=30, minutes=1) <= created_at <= now


async def test_posts_shape(conn: asyncpg.Connection) -> None:
    vis = dict(await conn.fetch("SELECT visibility, count(*) FROM posts GROUP BY 1"))
    assert vis["public"] > 0.7 * POSTS
    assert vis.get("followers", 0) > 0 and vis.get("private", 0) > 0
    per_author = [
        r[0]
        for r in await conn.fetch("SELECT count(*) FROM posts GROUP BY author_id ORDER BY 1 DESC")
    ]
    assert per_author[0] >= 5 * per_author[len(per_author) // 2]  # activity is skewed too
    # Only active users post, and their last activity is not before their last post.
    stale = await conn.fetchval(
        """
        SELECT count(*) FROM users u JOIN posts p ON p.author_id = u.id
        WHERE u.last_active_at IS NULL OR u.last_active_at < p.created_at
           OR u.last_active_at < now() - make_interval(days => $1)
        """,
        get_settings().active_days,
    )
    assert stale == 0


async def test_users_shape(conn: asyncpg.Connection) -> None:
    active, never, handles, hashes = await conn.fetchrow(
        """
        SELECT count(*) FILTER (WHERE last_active_at >= now() - make_interval(days => $1)),
               count(*) FILTER (WHERE last_active_at IS NULL),
               count(*) FILTER (WHERE handle ~ '^u[0-9]{6}$'),
               count(DISTINCT password_hash)
        FROM users
        """,
        get_settings().active_days,
    )
    assert 0.5 * USERS <= active <= 0.7 * USERS
    assert never > 0
    assert handles == USERS and hashes == 1
    password_hash = await conn.fetchval("SELECT password_hash FROM users WHERE handle = 'u000001'")
    assert verify_password(password_hash, BULK_PASSWORD)
    # Explicit ids were COPYed: the identity must continue after them.
    assert await conn.fetchval("SELECT nextval(pg_get_serial_sequence('users', 'id'))") > USERS


async def test_refuses_non_empty_database(bulk_db: tuple[str, dict]) -> None:
    with pytest.raises(SeedError, match="--force"):
        await seed_bulk(bulk_db[0], 10, 2, 10, progress=False)
    with pytest.raises(SeedError, match="--force"):
        await seed_demo(bulk_db[0])


async def test_same_seed_same_graph() -> None:
    async with fresh_database() as url:
        signatures = []
        for _ in range(2):
            await seed_bulk(url, 300, 10, 500, seed=7, force=True, progress=False)
            c = await asyncpg.connect(url)
            try:
                signatures.append(
                    await c.fetchrow(
                        "SELECT count(*), sum(follower_id * 7919 + followee_id) FROM follows"
                    )
                )
            finally:
                await c.close()
        assert signatures[0] == signatures[1]


async def test_demo_network() -> None:
    threshold = get_settings().fanout_pull_threshold
    async with fresh_database() as url:
        started = time.perf_counter()
        stats = await seed_demo(url)
        assert time.perf_counter() - started < 10
        assert stats["celeb_mode"] == "PULL"
        c = await asyncpg.connect(url)
        try:
            celeb = await c.fetchrow("SELECT * FROM users WHERE handle = 'celeb'")
            assert celeb["fanout_mode"] == FANOUT_PULL and celeb["fanout_mode_version"] == 1
            assert celeb["follower_count"] >= threshold
            assert celeb["follower_count"] == await c.fetchval(
                "SELECT count(*) FROM follows WHERE followee_id = $1", celeb["id"]
            )
            named = await c.fetch(
                "SELECT * FROM users WHERE handle !~ '^fan' AND handle <> 'celeb' ORDER BY id"
            )
            assert len(named) >= 10 and named[0]["handle"] == "alice"
            # Named users are PUSH unless the configured threshold is tiny (the test config).
            for u in named:
                big = u["follower_count"] >= threshold
                assert u["fanout_mode"] == (FANOUT_PULL if big else FANOUT_PUSH), u["handle"]
            assert verify_password(named[0]["password_hash"], DEMO_PASSWORD)
            alice_follows = await c.fetchval(
                "SELECT count(*) FROM follows WHERE follower_id = $1", named[0]["id"]
            )
            assert alice_follows >= len(named) - 2
            # Everyone named follows celeb, and posts a few dozen times in the last days.
            for user in named:
                assert await c.fetchval(
                    "SELECT EXISTS (SELECT 1 FROM follows WHERE follower_id = $1"
                    " AND followee_id = $2)",
                    user["id"],
                    celeb["id"],
                )
                posts = await c.fetchval(
                    "SELECT count(*) FROM posts WHERE author_id = $1"
                    " AND created_at > now() - interval '5 days'",
                    user["id"],
                )
                assert 20 <= posts <= 40
            assert (
                await c.fetchval(
                    "SELECT count(*) FROM posts"
                    " WHERE (id >> 22) + 1420070400000"
                    " <> floor(extract(epoch FROM created_at) * 1000)"
                )
                == 0
            )
            assert await c.fetchval("SELECT count(*) FROM likes") > 0
        finally:
            await c.close()
        assert (await seed_demo(url, if_empty=True)).get("skipped") is True


async def test_readme_bulk_command_works_as_written() -> None:
    """The README's bulk-seed command, sizes made tiny, on a database that holds the demo
    data as after `make run`: it must run as written (the venv's python is ours)."""
    argv = readme_bulk_seed_command()
    tiny = {"--users": "300", "--avg-following": "5", "--posts": "500"}
    for flag, value in tiny.items():
        argv[argv.index(flag) + 1] = value
    async with fresh_database() as url:
        await seed_demo(url)
        assert argv[1] == "-m", argv  # `.venv/bin/python -m ...`: ours is sys.executable
        await cli(*argv[2:], env={"DATABASE_URL": url})
        c = await asyncpg.connect(url)
        try:
            assert await c.fetchval("SELECT count(*) FROM users") == 300
            assert await c.fetchval("SELECT count(*) FROM posts") == 500
        finally:
            await c.close()
