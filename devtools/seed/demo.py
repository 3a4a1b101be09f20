"""`demo`: a small named network to click through, with a celebrity in PULL mode
(docs/seeding.md, "demo")."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from app.config import get_settings
from app.db.models import FANOUT_PULL
from app.passwords import hash_password
from devtools.seed.common import (
    Phases,
    connect,
    prepare,
    refresh_post_counts,
    refresh_user_counts,
    table_counts,
    vacuum_analyze,
)
from devtools.seed.words import COMMENTS, post_body

DEMO_PASSWORD = "demo-password"

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
    phases = Phases(progress)
    started = time.perf_counter()
    now = datetime.now(UTC)
    conn = await connect(dsn)
    try:
        if if_empty and await conn.fetchval(
            "SELECT to_regclass('public.users') IS NOT NULL AND EXISTS (SELECT 1 FROM users)"
        ):
            return {"skipped": True, "reason": "database already has users"}
        async with conn.transaction():
            await prepare(conn, force)
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
                        post_body(rng, topics) for _ in range(max(0, count - len(lines)))
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
                await refresh_user_counts(conn, threshold)
                await refresh_post_counts(conn)
                # Pinned PULL (`python -m app.fanout pin celeb pull`), so the pull path is there
                # to see: left to the control plane, celeb's ~14 active followers of 10,100
                # would be pushed (`python -m app.fanout explain celeb` shows why).
                await conn.execute(
                    "UPDATE users SET fanout_pin = 'pull', fanout_mode = $1 WHERE handle = 'celeb'",
                    FANOUT_PULL,
                )
        with phases.phase("analyze"):
            await vacuum_analyze(conn)
        stats = await table_counts(conn)
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
            comments.append((post_id, follower, author, rng.choice(COMMENTS), at))
    await conn.copy_records_to_table(
        "likes", records=likes, columns=("post_id", "user_id", "author_id", "created_at")
    )
    await conn.copy_records_to_table(
        "comments",
        records=comments,
        columns=("post_id", "author_id", "post_author_id", "body", "created_at"),
    )
