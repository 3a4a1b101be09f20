"""What the hub reads from PostgreSQL and counts in Redis before a frame: a pull-mode post's
followers checked and counted in slices, and a new subscriber's first count.

Why apart from the hub: these are the SQL-backed steps (follows, blocks, posts since the
last reset) and the counting scripts they feed; the hub only routes what they return to its
subscribers. Each function takes its collaborators and returns states, it holds no state.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.realtime import counts, queries
from app.realtime.constants import DELIVER_SLICE, SLICE_WEIGHTS
from app.realtime.counts import FeedCount
from app.redis_scripts import AnyRedis
from app.timelines.store import TimelineStore

_NO_TRANSACTION = {"isolation_level": "AUTOCOMMIT"}  # the hub's reads (`reads`)

# Where counted states go: (user id -> state, the monotonic time read once for them all).
Offer = Callable[[dict[int, FeedCount], float | None], None]


@contextlib.asynccontextmanager
async def reads(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session for the hub's reads, outside a transaction (autocommit): each is one
    SELECT, or two independent ones, which READ COMMITTED gives a snapshot of its own
    anyway. BEGIN and ROLLBACK were two of such a read's three round trips: 3-8% of the
    connects' CPU, and two waits before a pull-mode post's first frame (issue 24)."""
    async with sessions() as session:
        await session.connection(execution_options=_NO_TRANSACTION)
        yield session


def delivery_slices(users: list[int]) -> list[list[int]]:
    """A pull-mode post's local followers cut into slices checked at once: one slice up to
    DELIVER_SLICE, else SLICES_IN_FLIGHT slices growing as SLICE_WEIGHTS (1:2:4:5).

    Why all at once: with 5,000 followers in five slices of 1,000 and four in flight, the
    fifth slice's SQL and Redis round trips started only when a first slice was back,
    and ran while the loop wrote the other slices' frames: that slice's frames were the
    round's last, 39-52 ms after the fourth's (docs/benchmarks/archive.md, "Live sockets, round
    3"). Why growing: the count script runs one slice after another in Redis, and the
    first frame waited for the first slice's SQL and script (25 ms of a 125 ms round for
    1,250 users). A small first slice starts the writes early; each next slice's script
    (~8 us a user) ends while the slices before it are written (~16-20 us a frame) as
    long as each slice is at most ~2.5x the users before it (decision 0062)."""
    n = len(users)
    if n <= DELIVER_SLICE:
        return [users] if users else []
    total = sum(SLICE_WEIGHTS)
    bounds, acc = [0], 0
    for weight in SLICE_WEIGHTS:
        acc += weight
        bounds.append(n * acc // total)
    return [users[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@dataclass(frozen=True, slots=True)
class PullPost:
    """A pull-mode author's post as its channel announces it (app.realtime.keys)."""

    author_id: int
    post_id: int
    created: int  # ms
    visibility: str
    published: float  # ms, when the notifier published it (frame latency)

    @classmethod
    def parse(cls, author_id: int, data: bytes) -> PullPost:
        post_id, created, visibility, published = data.split(b":")
        return cls(author_id, int(post_id), int(created), visibility.decode(), float(published))


async def deliver_pull_post(
    redis: AnyRedis,
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
    post: PullPost,
    followers: list[int],
    offer: Offer,
) -> None:
    """Check follows and blocks for these local followers now, count the post for those
    allowed, and offer each slice's states as soon as that slice is counted.

    In at most SLICES_IN_FLIGHT slices, all checked at once (`delivery_slices`): the
    first frames leave while later slices are still being checked, and the last frame
    waits for one slice's SQL and Redis round trips, not for every slice's in turn."""

    async def deliver(users: list[int]) -> None:
        async with reads(sessions) as session:
            allowed = await queries.allowed_recipients(session, post.author_id, users)
        states = await counts.add_for_users(
            redis,
            sorted(allowed),
            [(post.post_id, post.created)],
            settings,
            author_id=post.author_id,
            published_ms=post.published,
        )
        offer(states, time.monotonic())

    outcomes = await asyncio.gather(
        *map(deliver, delivery_slices(followers)), return_exceptions=True
    )
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    if failed:
        raise failed[0]


async def keep_mutes(
    redis: AnyRedis,
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
    users: list[int],
) -> None:
    """These users' mutes planted as stop marks where missing (`counts.plant_stops`), so a
    fan-out batch, which counts against the marks alone, counts no muted author's post even
    after the marks' key expired or Redis lost it. One query and one pipeline for them all."""
    async with reads(sessions) as session:
        muted = await queries.muted_authors_many(session, users)
    await counts.plant_stops(redis, muted, settings)


async def first_counts(
    redis: AnyRedis,
    sessions: async_sessionmaker[AsyncSession],
    timelines: TimelineStore,
    settings: Settings,
    users: list[int],
    authors: dict[int, set[int]],
) -> dict[int, FeedCount]:
    """Each newly subscribed user's current count (`authors`: the pull-mode authors each
    follows), after counting what arrived while they were away.

    Posts that arrived while a user was away (no count was kept for them while offline):
    pushed ones from the timeline, pull-mode ones from Postgres; only those the user may be
    told about now (the timeline may still hold an unfollowed or blocked author's posts),
    with their authors so the pairs' stop marks apply. Counting them again is idempotent."""
    since = await counts.reset_marks(redis, users, settings)
    limit = settings.realtime_count_max
    latest = await timelines.latest_many(users, limit)
    found = {u: [(p, ms) for p, ms in latest[u] if ms > since[u]] for u in users}
    pulling = [u for u in users if authors.get(u)]
    async with reads(sessions) as session:
        if pulling:
            pulled = await queries.posts_since_each(
                session,
                sorted({a for u in pulling for a in authors[u]}),
                min(since[u] for u in pulling),
                limit,
            )
            for u in pulling:
                mine = [e for a in authors[u] for e in pulled.get(a, ()) if e[1] > since[u]]
                found[u] += sorted(mine, key=lambda e: e[1], reverse=True)[:limit]
        entries = await queries.countable_entries_many(
            session, {u: found[u] for u in users if found[u]}
        )
    return await counts.add_each(redis, {u: entries.get(u, []) for u in users}, settings)
