"""`bulk`: a large skewed social network for benchmarks (docs/seeding.md, "bulk")."""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from tqdm import tqdm

from app.config import get_settings
from app.passwords import hash_password
from devtools.seed.common import (
    USER_COLUMNS,
    Phases,
    SeedError,
    check_references,
    connect,
    prepare,
    refresh_post_counts,
    refresh_user_counts,
    skip_fk_triggers,
    sync_user_sequence,
    table_counts,
    vacuum_analyze,
)
from devtools.seed.words import COMMENTS, FIRST_NAMES, LAST_NAMES, post_body

BULK_PASSWORD = "password"

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
    phases = Phases(progress)
    started = time.perf_counter()
    now = datetime.now(UTC).replace(microsecond=0)

    # Popularity: rank 1 is the most followed; ranks map to random users so ids carry no meaning.
    by_rank = list(range(1, users + 1))
    rng.shuffle(by_rank)
    always_active = set(by_rank[: max(1, int(users * ALWAYS_ACTIVE_TOP_SHARE))])
    width = max(6, len(str(users)))

    conn = await connect(dsn)
    try:
        fk_triggers_skipped = await skip_fk_triggers(conn)
        async with conn.transaction():
            await prepare(conn, force)
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
                    name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
                    handle = f"u{user_id:0{width}d}"
                    records.append((user_id, handle, password_hash, name, created_at, seen))
                await conn.copy_records_to_table(
                    "users",
                    records=records,
                    columns=USER_COLUMNS,
                )
                await sync_user_sequence(conn)
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
                await refresh_user_counts(conn, threshold)
                await refresh_post_counts(conn)
            if fk_triggers_skipped:
                with phases.phase("check"):
                    await check_references(conn)

        with phases.phase("analyze"):
            await vacuum_analyze(conn)
        stats = await table_counts(conn)
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
    bodies = [post_body(rng) for _ in range(4096)]
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
    phases: Phases,
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
            args += [list(COMMENTS), len(COMMENTS)]
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
