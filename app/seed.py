"""Seed data: a large skewed network for benchmarks (`bulk`) and a small pleasant one (`demo`).

    python -m app.seed bulk --users 100000 --avg-following 50 --posts 2000000
    python -m app.seed demo [--if-empty]

Both talk to Postgres with asyncpg directly (binary COPY and set-based SQL) because the ORM
would be orders of magnitude slower at these volumes. Redis is never touched: timelines are
rebuilt from Postgres on a user's first read, which is exactly the cold-start path to exercise.
The schema belongs to Alembic; the seeder only inserts rows (and TRUNCATEs them with --force).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import random
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from tqdm import tqdm

from app.config import get_settings
from app.db.models import FANOUT_PULL, FANOUT_PUSH
from app.passwords import hash_password

BULK_PASSWORD = "password"
DEMO_PASSWORD = "demo-password"

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

# Shape of the bulk network. Popularity is Zipf-like: weight(rank) = (rank + OFFSET) ** -S.
# With S = 1 a 100k-user network gets a few authors followed by most users, a few dozen in the
# tens of thousands, and a long tail with a handful of followers each.
POPULARITY_EXPONENT = 1.0
POPULARITY_OFFSET = 1.0
# Followees per user: log-normal around --avg-following (most follow few, some follow many).
FOLLOWING_SIGMA = 1.0
# Posts per active author: continuous power law over an activity rank (milder than followers:
# the busiest author posts a few hundred times a month, not half of all posts).
ACTIVITY_EXPONENT = 0.5
# Share of visibilities; the rest is private.
PUBLIC_SHARE = 0.85
FOLLOWERS_SHARE = 0.10
# Users always active regardless of --active-fraction: the most popular 1%, so big authors post.
ALWAYS_ACTIVE_TOP_SHARE = 0.01
POST_CHUNK = 100_000


class SeedError(RuntimeError):
    """A seed cannot run as asked (non-empty database, schema missing, bad arguments)."""


def plain_dsn(url: str) -> str:
    """DATABASE_URL as the plain libpq URL asyncpg wants, whatever scheme the operator gave."""
    for prefix in ("postgresql+asyncpg://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return url


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------

_TOPICS = (
    "coffee",
    "the new release",
    "my sourdough starter",
    "rust lifetimes",
    "the morning commute",
    "this weather",
    "the playoffs",
    "tiny houses",
    "mechanical keyboards",
    "the farmers market",
    "a 10k run",
    "pho",
    "nasi lemak",
    "the night market",
    "jazz records",
    "houseplants",
    "postgres indexes",
    "redis",
    "budget travel",
    "my cat",
    "street food",
    "board games",
    "the library",
    "bubble tea",
    "cycling",
    "film photography",
    "banh mi",
    "roti canai",
    "sunrise hikes",
    "the bus schedule",
    "karaoke",
    "open source",
    "a good notebook",
    "rainy afternoons",
    "the office plant",
    "late night ramen",
    "podcasts",
    "old maps",
)
_REACTIONS = (
    "10/10 would recommend.",
    "Not sure how I feel about it.",
    "Mind blown.",
    "Send help.",
    "Worth it.",
    "Why did nobody tell me sooner?",
    "Still processing.",
    "Highly recommend.",
    "Would do it again tomorrow.",
    "My wallet disagrees.",
    "No regrets.",
    "Honestly? Great.",
)
_ADJECTIVES = (
    "underrated",
    "wonderful",
    "chaotic",
    "surprisingly good",
    "a lot",
    "peak",
    "cozy",
    "delightful",
    "overrated",
    "the best part of my week",
    "harder than it looks",
)
_TEMPLATES = (
    "Finally tried {t}. {r}",
    "Hot take: {t} is {a}.",
    "Day {n} of getting into {t}. {r}",
    "Can't stop thinking about {t}. {r}",
    "Anyone else obsessed with {t} lately?",
    "Spent the afternoon on {t}. {r}",
    "Reminder: {t} is {a}. That's it, that's the post.",
    "Unpopular opinion: {t} is {a}.",
    "Quick thread on {t} (1/{n})",
    "Weekend plans: {t}, then {u}.",
    "Shoutout to whoever invented {t}.",
    "{T} > {u}. Fight me.",
    "Note to self: less {t}, more {u}.",
    "Three words: {t}. {r}",
)
_COMMENTS = (
    "Love this!",
    "So true.",
    "Haha, same.",
    "Tell me more?",
    "Where was this?",
    "Agreed 100%.",
    "Hard disagree, but respect.",
    "This made my day.",
    "Bookmarking this.",
    "Congrats!",
    "Wait, really?",
    "Saving this for later.",
    "You should write a longer post about it.",
    "Ok now I want to try it too.",
    "Underrated post.",
    "Big if true.",
)
_FIRST_NAMES = (
    "An",
    "Minh",
    "Linh",
    "Huy",
    "Mai",
    "Siti",
    "Aisyah",
    "Hafiz",
    "Nurul",
    "Wei",
    "Mei",
    "Arjun",
    "Priya",
    "Sam",
    "Alex",
    "Jordan",
    "Maria",
    "Jonas",
    "Lena",
    "Kenji",
    "Yuki",
    "Omar",
    "Fatima",
    "Diego",
    "Sofia",
    "Noah",
    "Emma",
    "Liam",
    "Ava",
    "Chidi",
    "Amara",
)
_LAST_NAMES = (
    "Nguyen",
    "Tran",
    "Le",
    "Pham",
    "Abdullah",
    "Rahman",
    "Tan",
    "Lim",
    "Wong",
    "Sharma",
    "Patel",
    "Garcia",
    "Silva",
    "Müller",
    "Schmidt",
    "Sato",
    "Kim",
    "Okafor",
    "Haddad",
    "Rossi",
    "Novak",
    "Smith",
    "Johansson",
    "Dubois",
    "Costa",
)


def _post_body(rng: random.Random, topics: Sequence[str] = _TOPICS) -> str:
    """A short plausible post, so screenshots and text search look like a real feed."""
    t, u = rng.sample(list(topics), 2) if len(topics) > 1 else (topics[0], topics[0])
    body = rng.choice(_TEMPLATES).format(
        t=t,
        u=u,
        T=t[0].upper() + t[1:],
        r=rng.choice(_REACTIONS),
        a=rng.choice(_ADJECTIVES),
        n=rng.randint(2, 30),
    )
    if rng.random() < 0.25:
        body += " #" + t.split()[-1].replace("'", "")
    return body


# --------------------------------------------------------------------------------------------
# Shared database steps
# --------------------------------------------------------------------------------------------


async def _connect(dsn: str) -> asyncpg.Connection:
    return await asyncpg.connect(
        plain_dsn(dsn),
        server_settings={
            "application_name": "hybridfeed-seed",
            # Bigger sorts/hashes in memory for the set-based steps; session-local only.
            "work_mem": "128MB",
            "maintenance_work_mem": "256MB",
        },
    )


async def _skip_fk_triggers(conn: asyncpg.Connection) -> bool:
    """Turn off foreign-key triggers for this session when allowed (superuser); True if so.

    Row-by-row RI checks are most of the cost of loading millions of rows (5M follows: ~80 s
    with them, ~30 s without). The seeder builds ids that exist by construction and verifies
    every reference with set-based anti-joins before committing (_check_references), so the
    guarantee holds either way. Without the privilege the checks just stay on.
    """
    try:
        await conn.execute("SET session_replication_role = replica")
    except asyncpg.InsufficientPrivilegeError:
        return False
    return True


async def _check_references(conn: asyncpg.Connection) -> None:
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


async def _prepare(conn: asyncpg.Connection, force: bool) -> bool:
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


async def _refresh_user_counts(conn: asyncpg.Connection, pull_threshold: int) -> None:
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


async def _refresh_post_counts(conn: asyncpg.Connection) -> None:
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


async def _sync_user_sequence(conn: asyncpg.Connection) -> None:
    """Explicit ids were COPYed: move the identity past them so sign-ups do not collide."""
    await conn.execute(
        "SELECT setval(pg_get_serial_sequence('users', 'id'),"
        " greatest((SELECT max(id) FROM users), 1))"
    )


async def _table_counts(conn: asyncpg.Connection) -> dict[str, Any]:
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


async def _vacuum_analyze(conn: asyncpg.Connection) -> None:
    """Fresh statistics and visibility map, so the first benchmark queries get real plans."""
    for table in ("users", "follows", "posts", "likes", "comments"):
        await conn.execute(f"VACUUM (ANALYZE) {table}")


class _Phases:
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


# --------------------------------------------------------------------------------------------
# bulk
# --------------------------------------------------------------------------------------------


def _following_counts(rng: random.Random, users: int, avg: float) -> list[int]:
    """Out-degree per user: log-normal with mean ~avg, at least 1, at most half the network."""
    if users < 2 or avg <= 0:
        return [0] * users
    cap = max(1, (users - 1) // 2)
    mu = math.log(avg) - FOLLOWING_SIGMA**2 / 2
    return [min(cap, max(1, round(rng.lognormvariate(mu, FOLLOWING_SIGMA)))) for _ in range(users)]


def _follow_records(
    rng: random.Random,
    by_rank: list[int],
    following: list[int],
    followed_at: list[datetime],
    bar: tqdm,
) -> Iterator[tuple[int, int, datetime]]:
    """(follower, followee, created_at) rows, streamed straight into COPY.

    Each user's followees are drawn with probability proportional to popularity (Zipf weights
    over a random rank order), redrawing duplicates and self-follows until the user's count is
    reached. Streaming lets Postgres index one batch while Python draws the next.
    """
    cum = list(
        itertools.accumulate(
            (r + POPULARITY_OFFSET) ** -POPULARITY_EXPONENT for r in range(1, len(by_rank) + 1)
        )
    )
    choices = rng.choices
    for index, want in enumerate(following):
        user_id = index + 1
        chosen: set[int] = set()
        while len(chosen) < want:
            missing = want - len(chosen)
            for followee in choices(by_rank, cum_weights=cum, k=missing + missing // 4 + 2):
                if followee != user_id:
                    chosen.add(followee)
                    if len(chosen) == want:
                        break
        at = followed_at[index]
        for followee in chosen:
            yield (user_id, followee, at)
        bar.update(1)


async def seed_bulk(
    dsn: str,
    users: int,
    avg_following: float,
    posts: int,
    *,
    days: float = 30,
    active_fraction: float = 0.6,
    seed: int = 42,
    likes_per_post: float = 0.5,
    comments_per_post: float = 0.1,
    pull_threshold: int | None = None,
    force: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Fill an empty, migrated database with a skewed social network; returns counts and timings.

    Deterministic for a given seed (Python RNG plus Postgres setseed). All rows go in one
    transaction, so a failed run leaves the database as it was.
    """
    if users < 1 or posts < 0 or avg_following < 0 or days <= 0:
        raise SeedError("need users >= 1, posts >= 0, avg_following >= 0, days > 0")
    if not 0 <= active_fraction <= 1:
        raise SeedError("active_fraction must be within [0, 1]")
    settings = get_settings()
    threshold = settings.fanout_pull_threshold if pull_threshold is None else pull_threshold
    active_days = settings.active_days
    rng = random.Random(seed)
    phases = _Phases(progress)
    started = time.perf_counter()
    now = datetime.now(UTC).replace(microsecond=0)

    # Popularity: rank 1 is the most followed; ranks map to random users so ids carry no meaning.
    by_rank = list(range(1, users + 1))
    rng.shuffle(by_rank)
    always_active = set(by_rank[: max(1, int(users * ALWAYS_ACTIVE_TOP_SHARE))])
    width = max(6, len(str(users)))

    conn = await _connect(dsn)
    try:
        fk_triggers_skipped = await _skip_fk_triggers(conn)
        async with conn.transaction():
            await _prepare(conn, force)
            await conn.execute("SELECT setseed($1)", (seed % 1_000_003) / 1_000_003)

            with phases.phase("users", users, "user") as bar:
                password_hash = hash_password(BULK_PASSWORD)  # once: Argon2 is slow on purpose
                active: list[int] = []
                created: list[datetime] = []
                records = []
                for user_id in range(1, users + 1):
                    created_at = now - timedelta(days=days + 30 + rng.random() * 700)
                    if user_id in always_active or rng.random() < active_fraction:
                        seen: datetime | None = now - timedelta(days=rng.random() * active_days)
                        active.append(user_id)
                    elif rng.random() < 0.5:
                        seen = now - timedelta(days=active_days + 1 + rng.random() * 300)
                    else:
                        seen = None  # signed up, never came back
                    created.append(created_at)
                    name = f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES)}"
                    handle = f"u{user_id:0{width}d}"
                    records.append((user_id, handle, password_hash, name, created_at, seen))
                await conn.copy_records_to_table(
                    "users",
                    records=records,
                    columns=(
                        "id",
                        "handle",
                        "password_hash",
                        "display_name",
                        "created_at",
                        "last_active_at",
                    ),
                )
                await _sync_user_sequence(conn)
                bar.update(users)
                del records

            with phases.phase("follows", users, "user") as bar:
                following = _following_counts(rng, users, avg_following)
                followed_at = [c + timedelta(days=1) for c in created]
                await conn.copy_records_to_table(
                    "follows",
                    records=_follow_records(rng, by_rank, following, followed_at, bar),
                    columns=("follower_id", "followee_id", "created_at"),
                )

            with phases.phase("posts", posts, "post") as bar:
                await _insert_bulk_posts(conn, rng, active, posts, now, days, bar)

            engaged = await _bulk_engagement(
                conn, phases, posts, likes_per_post, comments_per_post, active_days, seed
            )

            with phases.phase("counts"):
                await _refresh_user_counts(conn, threshold)
                await _refresh_post_counts(conn)
            if fk_triggers_skipped:
                with phases.phase("check"):
                    await _check_references(conn)

        with phases.phase("analyze"):
            await _vacuum_analyze(conn)
        stats = await _table_counts(conn)
        stats["active_users"] = await conn.fetchval(
            "SELECT count(*) FROM users WHERE last_active_at >= now() - make_interval(days => $1)",
            active_days,
        )
        top = await conn.fetch(
            "SELECT handle, follower_count FROM users ORDER BY follower_count DESC, id LIMIT 5"
        )
    finally:
        await conn.close()
    stats.update(
        pull_threshold=threshold,
        top_authors=[(r["handle"], r["follower_count"]) for r in top],
        engagement_sample_percent=engaged,
        fk_triggers_skipped=fk_triggers_skipped,
        phases=phases.seconds,
        seconds=round(time.perf_counter() - started, 2),
    )
    return stats


async def _insert_bulk_posts(
    conn: asyncpg.Connection,
    rng: random.Random,
    active: list[int],
    posts: int,
    now: datetime,
    days: float,
    bar: tqdm,
) -> None:
    """Posts by active users only, activity power-law skewed, ids from next_post_id(created_at).

    Generated in SQL (generate_series) in chronological slices, each sorted by time, so the
    primary-key index is appended to rather than split, and no post rows cross the wire.
    created_at is cut to the millisecond so (created_at, id) orders exactly like the Redis
    (score, member) pair the read path uses.
    """
    if posts == 0:
        return
    if not active:
        raise SeedError("no active users to author posts (active_fraction is 0?)")
    authors = active[:]
    rng.shuffle(authors)
    await conn.execute(
        "CREATE TEMP TABLE seed_authors (rank int PRIMARY KEY, user_id bigint) ON COMMIT DROP"
    )
    await conn.copy_records_to_table(
        "seed_authors", records=list(enumerate(authors, start=1)), columns=("rank", "user_id")
    )
    bodies = [_post_body(rng) for _ in range(4096)]
    await conn.execute(
        "CREATE TEMP TABLE seed_bodies (i int PRIMARY KEY, body text) ON COMMIT DROP"
    )
    await conn.copy_records_to_table("seed_bodies", records=list(enumerate(bodies)))
    await conn.execute("ANALYZE seed_authors; ANALYZE seed_bodies")

    # Inverse CDF of density ~ rank^-s on [1, A+1): rank = (1 + u((A+1)^(1-s) - 1))^(1/(1-s)).
    exponent = 1 - ACTIVITY_EXPONENT
    span = (len(authors) + 1) ** exponent - 1
    chunks = max(1, math.ceil(posts / POST_CHUNK))
    start = now - timedelta(days=days)
    step = timedelta(days=days) / chunks
    for i in range(chunks):
        count = posts // chunks + (1 if i < posts % chunks else 0)
        await conn.execute(
            """
            INSERT INTO posts (id, author_id, created_at, body, visibility)
            SELECT next_post_id(s.ts), a.user_id, s.ts, b.body,
                   CASE WHEN s.v < $6::float8 THEN 'public' WHEN s.v < $7::float8 THEN 'followers'
                        ELSE 'private' END
            FROM (
                SELECT date_trunc('milliseconds', $1::timestamptz + random() * $2::interval) AS ts,
                       least($4::int, floor(power(1 + random() * $3::float8, $5::float8)))::int
                           AS rank,
                       floor(random() * 4096)::int AS bi,
                       random() AS v
                FROM generate_series(1, $8::int)
            ) s
            JOIN seed_authors a ON a.rank = s.rank
            JOIN seed_bodies b ON b.i = s.bi
            ORDER BY s.ts
            """,
            start + step * i,
            step,
            span,
            len(authors),
            1 / exponent,
            PUBLIC_SHARE,
            PUBLIC_SHARE + FOLLOWERS_SHARE,
            count,
        )
        bar.update(count)


async def _bulk_engagement(
    conn: asyncpg.Connection,
    phases: _Phases,
    posts: int,
    likes_per_post: float,
    comments_per_post: float,
    active_days: int,
    seed: int,
) -> dict[str, float]:
    """Likes and comments by active followers on their followees' non-private posts.

    A random sample of eligible follow edges (active follower, followee with visible posts)
    each engages with one post of the followee, the first at or after a random moment of the
    followee's posting span. Engagement so concentrates on popular authors like in real feeds,
    and author affinity (likes per followee) has signal. Totals hit the targets on average.
    """
    result: dict[str, float] = {}
    if not posts or (likes_per_post <= 0 and comments_per_post <= 0):
        return result
    await conn.execute(
        """
        CREATE TEMP TABLE seed_spans ON COMMIT DROP AS
        SELECT author_id, min(created_at) AS lo, max(created_at) AS hi
        FROM posts WHERE visibility <> 'private' GROUP BY author_id;
        ALTER TABLE seed_spans ADD PRIMARY KEY (author_id);
        ANALYZE seed_spans
        """
    )
    eligible_from = """
        FROM follows f {sample}
        JOIN users u ON u.id = f.follower_id
        JOIN seed_spans sp ON sp.author_id = f.followee_id
        WHERE u.last_active_at >= now() - make_interval(days => $1::int)
    """
    follows = await conn.fetchval("SELECT count(*) FROM follows")
    eligible = await conn.fetchval(
        "SELECT count(*) " + eligible_from.format(sample=""), active_days
    )
    if not eligible:
        return result
    specs = (
        ("likes", likes_per_post, "likes (post_id, user_id, author_id, created_at)", ""),
        (
            "comments",
            comments_per_post,
            "comments (post_id, author_id, post_author_id, created_at, body)",
            ", ($4::text[])[1 + floor(random() * $5::int)::int]",
        ),
    )
    for offset, (name, per_post, target, body) in enumerate(specs):
        percent = min(100.0, 100.0 * per_post * posts / eligible)
        result[name] = round(percent * eligible / follows, 3)
        if percent <= 0:
            continue
        args: list[Any] = [active_days, percent, seed + offset]
        if body:
            args += [list(_COMMENTS), len(_COMMENTS)]
        sample = "TABLESAMPLE BERNOULLI ($2::float8) REPEATABLE ($3::float8)"
        with phases.phase(name):
            await conn.execute(
                f"""
                INSERT INTO {target}
                SELECT p.id, s.follower_id, s.followee_id,
                       least(now(), p.created_at + s.lag){body}
                FROM (
                    SELECT f.follower_id, f.followee_id,
                           sp.lo + random() * (sp.hi - sp.lo) AS t,
                           random() * interval '6 hours' AS lag
                    {eligible_from.format(sample=sample)}
                ) s
                CROSS JOIN LATERAL (
                    SELECT id, created_at FROM posts
                    WHERE author_id = s.followee_id AND created_at >= s.t
                      AND visibility <> 'private'
                    ORDER BY created_at LIMIT 1
                ) p
                """,
                *args,
            )
    return result


# --------------------------------------------------------------------------------------------
# demo
# --------------------------------------------------------------------------------------------

# handle, display name, interests, a few posts in their own voice.
_PERSONAS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "alice",
        "Alice Nguyen",
        ("bouldering", "pour-over coffee", "postgres indexes", "pho"),
        (
            "Sent my first V5 tonight. Forearms are filing a complaint.",
            "A partial index just took a query from 900 ms to 4 ms. I love my job.",
            "Pour-over ratio of the week: 1:16, 94°C, and a lot of patience.",
            "Hanoi trip photos are finally sorted. Only took three months.",
            "Reviewing a PR that deletes 2,000 lines. Best kind of PR.",
            "Who wants to climb Saturday morning? Gym opens at 8.",
        ),
    ),
    (
        "bob",
        "Bob Tan",
        ("sourdough", "cycling", "kopi", "weekend markets"),
        (
            "Starter is named Doughlores and she is thriving.",
            "80 km ride before breakfast, then a well-earned kopi peng.",
            "Crumb shot incoming. I'm not even sorry.",
            "The market guy remembered my order. I am a regular now.",
            "Flat tyre at km 3. Classic Sunday.",
            "Tried a 30% rye loaf. Dense, tangy, would bake again.",
        ),
    ),
    (
        "carol",
        "Carol Lim",
        ("film photography", "golden hour", "street portraits", "darkrooms"),
        (
            "Developed a roll of Portra 400 and every frame came out. A miracle.",
            "Golden hour at the harbour, no filter needed.",
            "New-to-me camera from 1978 arrived. Light meter works!",
            "Asked a stranger for a portrait today and she said yes. Nervous but happy.",
            "Darkroom session booked for Thursday.",
            "Scanning negatives is my meditation now.",
        ),
    ),
    (
        "dave",
        "Dave Okafor",
        ("marathon training", "tempo runs", "jollof rice", "podcasts"),
        (
            "Week 9 of marathon training: 52 km, zero injuries, one very tired Dave.",
            "Tempo run at 4:45/km. Lungs say no, legs say yes.",
            "Jollof for the long-run carb load. Science.",
            "Rain run today. Honestly the best kind.",
            "New running podcast recommendations welcome.",
            "Race bib arrived. It is getting real.",
        ),
    ),
    (
        "erin",
        "Erin Walsh",
        ("houseplants", "tomatoes", "composting", "seed swaps"),
        (
            "The monstera has a new leaf and I am unreasonably proud.",
            "First tomato of the season. It was perfect and I ate it standing in the garden.",
            "Compost bin is finally warm. The worms are working.",
            "Seed swap this weekend at the library. Bringing chilli seeds.",
            "Repotted eleven plants. My floor is mostly soil now.",
            "Basil forest update: still a forest.",
        ),
    ),
    (
        "frank",
        "Frank Rossi",
        ("fresh pasta", "risotto", "the restaurant", "espresso"),
        (
            "Hand-rolled 200 tortellini before service. My thumbs are retired.",
            "Risotto is just patience with rice.",
            "Family meal today: cacio e pepe for twelve.",
            "The new espresso machine has a name and the name is Bruno.",
            "Tasting menu changes next week. Sneak peek: lemon and ricotta.",
            "Nonna's ragù recipe, adjusted by exactly zero grams.",
        ),
    ),
    (
        "grace",
        "Grace Park",
        ("board games", "data viz", "sql", "bubble tea"),
        (
            "Game night: five players, one very long round of Catan.",
            "Made a chart so clear my manager stopped asking questions.",
            "Window functions are a love language.",
            "Bubble tea order: brown sugar, 30% sweet, extra pearls. Final answer.",
            "Built a tiny dashboard for our plant-watering schedule.",
            "New board game cafe opened downtown. Dangerous.",
        ),
    ),
    (
        "heidi",
        "Heidi Müller",
        ("night trains", "hiking", "travel journals", "bakeries"),
        (
            "Booked a night train to Vienna. Sleeper cabin, tiny sink, pure joy.",
            "Summit at 7 a.m., clouds below us. Worth the 4 a.m. alarm.",
            "Travel journal: page 42, mostly bakery reviews.",
            "Every town has one perfect bakery. My job is to find it.",
            "Packed in one carry-on for two weeks. Ask me anything.",
            "Trains > planes, at least for the views.",
        ),
    ),
    (
        "ivan",
        "Ivan Petrov",
        ("chess", "jazz records", "vinyl", "late night radio"),
        (
            "Won a 40-move endgame with two knights. Still shaking.",
            "Found a first pressing of Kind of Blue at a flea market.",
            "Blitz rating finally above 1800.",
            "Late night radio is the best radio.",
            "Chess puzzle of the day took me 20 minutes. Humbling.",
            "Jazz trio at the corner bar tonight. Highly recommended.",
        ),
    ),
    (
        "judy",
        "Judy Alvarez",
        ("teaching", "novels", "book clubs", "tea"),
        (
            "My class wrote poems about volcanoes today. Some were genuinely great.",
            "Book club pick this month: something long and Russian. Pray for us.",
            "Finished a novel at 2 a.m. Regret nothing.",
            "Tea and grading, the eternal Sunday combo.",
            "A student said history is 'actually kind of cool'. Career peak.",
            "Library haul: seven books, three weeks. Ambitious.",
        ),
    ),
    (
        "mallory",
        "Mallory Chen",
        ("security", "puzzles", "CTF nights", "mechanical keyboards"),
        (
            "Reminder: rotate your keys. Yes, those ones.",
            "Our CTF team placed 4th. The last flag was pure chaos.",
            "Built a keyboard with tactile switches. My coworkers hate it.",
            "Found a bug in a bug bounty scope note. Meta.",
            "Crossword solved in pen. Confidence is key.",
            "Threat modelling my grocery list. Eggs are a single point of failure.",
        ),
    ),
    (
        "niaj",
        "Niaj Rahman",
        ("guitar", "street food", "open mics", "songwriting"),
        (
            "Open mic tonight, played two new songs, nobody threw anything.",
            "Best roti canai in town is the stall with no sign. Trust me.",
            "Wrote a song about the bus being late. It's a banger.",
            "Changed my guitar strings. Sounds like a new instrument.",
            "Street food crawl: satay, then cendol, then a nap.",
            "Recording a demo this weekend in my very echoey kitchen.",
        ),
    ),
)
_CELEB = (
    "celeb",
    "Celeste Bright",
    ("world tour", "new album", "fans", "rehearsals"),
    (
        "Thank you Kuala Lumpur! You were LOUD tonight.",
        "New single drops Friday. I can't wait for you to hear it.",
        "Rehearsal day 3. My voice says hi.",
        "Reading your messages backstage. You make this worth it.",
        "Tour bus karaoke has no rules.",
        "Saigon, see you next month!",
        "Studio all night. Something special is happening.",
        "Merch question: hoodies or tote bags? Both. The answer is both.",
    ),
)


async def seed_demo(
    dsn: str,
    *,
    if_empty: bool = False,
    force: bool = False,
    seed: int = 7,
    pull_threshold: int | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """A small network to click through: named users, a celebrity in PULL mode, some chatter.

    With if_empty, an existing database is left alone (returns {"skipped": True}), so it can
    run on every dev start. The celebrity gets cheap silent fan accounts (inactive, no posts)
    to cross the pull threshold, which exercises the hybrid read path from the first click.
    """
    settings = get_settings()
    threshold = settings.fanout_pull_threshold if pull_threshold is None else pull_threshold
    rng = random.Random(seed)
    phases = _Phases(progress)
    started = time.perf_counter()
    now = datetime.now(UTC)
    conn = await _connect(dsn)
    try:
        if if_empty and await conn.fetchval(
            "SELECT to_regclass('public.users') IS NOT NULL AND EXISTS (SELECT 1 FROM users)"
        ):
            return {"skipped": True, "reason": "database already has users"}
        async with conn.transaction():
            await _prepare(conn, force)
            password_hash = hash_password(DEMO_PASSWORD)
            people = (*_PERSONAS, _CELEB)
            with phases.phase("users"):
                records: list[tuple[str, str, str, datetime, datetime | None]] = [
                    (
                        handle,
                        password_hash,
                        name,
                        now - timedelta(days=200 + 20 * i),
                        now - timedelta(minutes=rng.randint(1, 600)),
                    )
                    for i, (handle, name, _, _) in enumerate(people)
                ]
                fans = max(0, threshold + max(10, threshold // 100) - len(_PERSONAS))
                records += [
                    (
                        f"fan{n:05d}",
                        password_hash,
                        f"Fan {n}",
                        now - timedelta(days=90),
                        None if n % 2 else now - timedelta(days=60),
                    )
                    for n in range(1, fans + 1)
                ]
                await conn.copy_records_to_table(
                    "users",
                    records=records,
                    columns=(
                        "handle",
                        "password_hash",
                        "display_name",
                        "created_at",
                        "last_active_at",
                    ),
                )
                ids = dict(await conn.fetch("SELECT handle, id FROM users"))
            named = [p[0] for p in _PERSONAS]

            with phases.phase("follows"):
                edges: set[tuple[str, str]] = set()
                for handle in named:
                    edges.add((handle, "celeb"))
                    if handle == "alice":
                        others = [h for h in named if h not in ("alice", "mallory")]
                    else:
                        others = rng.sample([h for h in named if h != handle], rng.randint(3, 6))
                        others.append("alice")  # everyone knows alice
                    edges.update((handle, o) for o in others if o != handle)
                edges.add(("celeb", "alice"))
                follow_rows = [(ids[a], ids[b], now - timedelta(days=30)) for a, b in edges]
                follow_rows += [
                    (ids[f"fan{n:05d}"], ids["celeb"], now - timedelta(days=80))
                    for n in range(1, fans + 1)
                ]
                await conn.copy_records_to_table(
                    "follows",
                    records=follow_rows,
                    columns=("follower_id", "followee_id", "created_at"),
                )

            with phases.phase("posts"):
                await conn.execute(
                    "CREATE TEMP TABLE seed_demo_posts (author_id bigint, created_at timestamptz,"
                    " body text, visibility text) ON COMMIT DROP"
                )
                post_rows = []
                for handle, _, topics, lines in people:
                    count = 12 if handle == "celeb" else rng.randint(24, 36)
                    texts = list(lines) + [
                        _post_body(rng, topics) for _ in range(max(0, count - len(lines)))
                    ]
                    for text in texts:
                        minutes = rng.uniform(5, 4 * 24 * 60)  # the last four days
                        at = now - timedelta(minutes=minutes)
                        at = at.replace(microsecond=at.microsecond // 1000 * 1000)
                        roll = rng.random()
                        vis = "public" if roll < 0.85 else "followers" if roll < 0.96 else "private"
                        post_rows.append((ids[handle], at, text, vis))
                await conn.copy_records_to_table("seed_demo_posts", records=post_rows)
                await conn.execute(
                    "INSERT INTO posts (id, author_id, created_at, body, visibility)"
                    " SELECT next_post_id(created_at), author_id, created_at, body, visibility"
                    " FROM seed_demo_posts ORDER BY created_at"
                )

            with phases.phase("engagement"):
                await _demo_engagement(conn, rng, now)
                await _refresh_user_counts(conn, threshold)
                await _refresh_post_counts(conn)
        with phases.phase("analyze"):
            await _vacuum_analyze(conn)
        stats = await _table_counts(conn)
        celeb = await conn.fetchrow(
            "SELECT follower_count, fanout_mode FROM users WHERE handle = 'celeb'"
        )
    finally:
        await conn.close()
    stats.update(
        handles=[*named, "celeb"],
        password=DEMO_PASSWORD,
        fans=fans,
        celeb_followers=celeb["follower_count"],
        celeb_mode="PULL" if celeb["fanout_mode"] == FANOUT_PULL else "PUSH",
        pull_threshold=threshold,
        phases=phases.seconds,
        seconds=round(time.perf_counter() - started, 2),
    )
    return stats


async def _demo_engagement(conn: asyncpg.Connection, rng: random.Random, now: datetime) -> None:
    """Named users like ~30% and comment on ~6% of the visible posts of those they follow."""
    rows = await conn.fetch(
        """
        SELECT f.follower_id, p.id, p.author_id, p.created_at
        FROM follows f
        JOIN users u ON u.id = f.follower_id AND u.handle NOT LIKE 'fan%'
        JOIN posts p ON p.author_id = f.followee_id AND p.visibility <> 'private'
        ORDER BY p.id, f.follower_id
        """
    )
    likes, comments = [], []
    for follower, post_id, author, created_at in rows:
        at = min(now, created_at + timedelta(minutes=rng.uniform(1, 300)))
        if rng.random() < 0.3:
            likes.append((post_id, follower, author, at))
        if rng.random() < 0.06:
            comments.append((post_id, follower, author, rng.choice(_COMMENTS), at))
    await conn.copy_records_to_table(
        "likes", records=likes, columns=("post_id", "user_id", "author_id", "created_at")
    )
    await conn.copy_records_to_table(
        "comments",
        records=comments,
        columns=("post_id", "author_id", "post_author_id", "body", "created_at"),
    )


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app.seed", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--database-url", help="defaults to DATABASE_URL (postgresql://user@host:port/db)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    bulk = sub.add_parser("bulk", help="large skewed network for benchmarks")
    bulk.add_argument("--users", type=int, default=100_000)
    bulk.add_argument("--avg-following", type=float, default=50)
    bulk.add_argument("--posts", type=int, default=2_000_000)
    bulk.add_argument("--days", type=float, default=30, help="posts spread over the last N days")
    bulk.add_argument("--active-fraction", type=float, default=0.6)
    bulk.add_argument("--likes-per-post", type=float, default=0.5)
    bulk.add_argument("--comments-per-post", type=float, default=0.1)
    bulk.add_argument("--seed", type=int, default=42)
    bulk.add_argument("--force", action="store_true", help="TRUNCATE existing data first")
    bulk.add_argument("--no-progress", action="store_true")

    demo = sub.add_parser("demo", help="small named network with a celebrity in pull mode")
    demo.add_argument("--if-empty", action="store_true", help="do nothing if users exist")
    demo.add_argument("--force", action="store_true", help="TRUNCATE existing data first")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    dsn = args.database_url or get_settings().database_url
    if not dsn:
        print("seed: DATABASE_URL is not set (or pass --database-url)", file=sys.stderr)
        return 2
    try:
        if args.command == "bulk":
            stats = asyncio.run(
                seed_bulk(
                    dsn,
                    args.users,
                    args.avg_following,
                    args.posts,
                    days=args.days,
                    active_fraction=args.active_fraction,
                    seed=args.seed,
                    likes_per_post=args.likes_per_post,
                    comments_per_post=args.comments_per_post,
                    force=args.force,
                    progress=not args.no_progress,
                )
            )
            for key, value in stats.items():
                print(f"{key}: {value}")
            first = f"u{1:0{max(6, len(str(args.users)))}d}"
            print(f"log in as any {first}-style handle with password {BULK_PASSWORD!r}")
        else:
            stats = asyncio.run(seed_demo(dsn, if_empty=args.if_empty, force=args.force))
            if stats.get("skipped"):
                print("demo seed skipped: the database already has users")
                return 0
            print(
                f"demo seeded in {stats['seconds']} s: {stats['users']} users "
                f"({stats['fans']} silent fans), {stats['posts']} posts, "
                f"{stats['follows']} follows, {stats['likes']} likes, {stats['comments']} comments"
            )
            print(
                f"celeb: {stats['celeb_followers']} followers, {stats['celeb_mode']} mode "
                f"(threshold {stats['pull_threshold']})"
            )
            print(f"log in as {', '.join(stats['handles'])} with password {stats['password']!r}")
    except SeedError as exc:
        print(f"seed: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
