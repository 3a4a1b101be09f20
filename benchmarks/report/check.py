"""What the run must have done, checked after each stream: every post reached every active
follower exactly once, and nothing leaked. Timings are not asserted here."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import asyncpg
import numpy as np

from app.timelines.store import TimelineStore, author_posts_key, timeline_key
from benchmarks.report.drive import ACTIVE_SQL, Posted, Visibility, queued_jobs
from benchmarks.report.system import Client, System
from jobs.dead_letters import DEAD_LETTERS


class Degraded(Exception):
    """The feed answered `degraded: true` (a source too slow): it proves nothing."""


DEGRADED_RETRIES = 4
PULLED_READS_BUDGET = 60  # feeds read over the API per check, at most
PULLED_READS_SECONDS = 120.0  # and for at most this long (pull-only reads can take seconds)


@dataclass
class Check:
    posts: int = 0
    pushed: int = 0
    pulled: int = 0
    entries: dict[int, int] = field(default_factory=dict)  # post -> timelines holding it
    expected: dict[int, int] = field(default_factory=dict)  # post -> its active followers
    pulled_reads: int = 0  # followers' feeds read through the API for pulled posts
    pulled_unverified: int = 0  # feeds that could not be read (timeouts): not checked
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def problem(self, text: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(text)


async def active_followers(dsn: str, authors: set[int]) -> dict[int, set[int]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            f"SELECT f.followee_id, f.follower_id FROM follows f JOIN users u "
            f"ON u.id = f.follower_id WHERE f.followee_id = ANY($1::bigint[]) AND u.{ACTIVE_SQL}",
            list(authors),
        )
    finally:
        await conn.close()
    found: dict[int, set[int]] = {a: set() for a in authors}
    for a, f in rows:
        found[a].add(f)
    return found


async def verify(
    system: System,
    client: Client,
    posted: list[Posted],
    seen: Visibility,
    active: np.ndarray,
    inactive: np.ndarray,
    sample: int,
) -> Check:
    """Timelines of every active user read back through the store; inactive users hold no
    timeline; pulled posts are in their author's index and in a sample of followers' feeds
    read through the API; the queues are empty, no job is a dead letter, no process logged a
    traceback."""
    assert system.redis is not None
    redis = system.redis
    result = Check(posts=len(posted))
    ours = {p.post_id: p for p in posted}
    followers = await active_followers(system.dsn, {p.author for p in posted})
    store = TimelineStore(redis, 800, 200)
    holders: dict[int, list[int]] = {p: [] for p in ours}
    ids = [int(u) for u in active]
    for i in range(0, len(ids), 5000):
        chunk = ids[i : i + 5000]
        found = await store.latest_many(chunk, 800)
        for user, entries in found.items():
            counts = Counter(post for post, _ in entries)
            for post, n in counts.items():
                if post in holders:
                    holders[post].append(user)
                    if n != 1:
                        result.problem(f"post {post} is {n} times in user {user}'s timeline")
        missing = await redis.exists(*(timeline_key(u) for u in chunk))
        if missing != len(chunk):
            result.problem(f"{len(chunk) - missing} active users lost their timeline")
    for i in range(0, len(inactive), 10_000):
        chunk = [timeline_key(int(u)) for u in inactive[i : i + 10_000]]
        if chunk and (there := await redis.exists(*chunk)):
            result.problem(f"{there} inactive users hold a timeline (fan-out created it)")
    # Feeds read over the API for pulled posts: `sample` followers per post, at most
    # PULLED_READS_BUDGET in all (pull-only pulls every post).
    per_post = max(1, min(sample, PULLED_READS_BUDGET // max(1, len(seen.pulled & set(ours)))))
    to_read: list[tuple[int, int]] = []
    for post_id, p in ours.items():
        should = followers[p.author]
        got = set(holders[post_id])
        result.entries[post_id] = len(holders[post_id])
        result.expected[post_id] = len(should)
        leaked = got - should
        if leaked:
            result.problem(
                f"post {post_id} leaked into {len(leaked)} timelines of non-followers "
                f"(e.g. {sorted(leaked)[:3]})"
            )
        if post_id in seen.pulled:
            result.pulled += 1
            index = await store.author_latest_many_or_none([p.author], 200)
            entries = [e for e, _ in (index.get(p.author) or [])]
            if entries.count(post_id) != 1:
                result.problem(f"pulled post {post_id} is {entries.count(post_id)} times in "
                               f"{author_posts_key(p.author)}")  # fmt: skip
            to_read += [(reader, post_id) for reader in sorted(should - got)[:per_post]]
        else:
            result.pushed += 1
            missing = should - got
            if missing:
                result.problem(
                    f"pushed post {post_id} missed {len(missing)} of {len(should)} active "
                    f"followers (e.g. {sorted(missing)[:3]})"
                )
    random.Random(len(to_read)).shuffle(to_read)  # spread over the posts
    await _read_pulled(client, to_read[:PULLED_READS_BUDGET], result)
    if waiting := await queued_jobs(system):
        result.problem(f"{len(waiting)} jobs still queued: {waiting[:3]}")
    if letters := await redis.hlen(DEAD_LETTERS):
        result.problem(f"{letters} dead-lettered jobs")
    if system.tracebacks():
        result.problem(f"{system.tracebacks()} tracebacks in the logs ({system.workdir})")
    return result


async def _read_pulled(client: Client, pairs: list[tuple[int, int]], result: Check) -> None:
    """Each (follower, pulled post): the post on the follower's feed, 4 readers at a time."""
    deadline = time.monotonic() + PULLED_READS_SECONDS
    queue = list(pairs)

    async def reader() -> None:
        while queue and time.monotonic() < deadline:
            follower, post_id = queue.pop()
            try:
                found = await _in_feed(client, follower, post_id)
            except Exception as exc:  # a read that timed out proves nothing either way
                result.pulled_unverified += 1
                result.notes.append(f"feed of {follower} unread: {type(exc).__name__}")
                continue
            result.pulled_reads += 1
            if not found:
                result.problem(f"pulled post {post_id} missing from follower {follower}'s feed")

    await asyncio.gather(*(reader() for _ in range(4)))


async def _in_feed(client: Client, viewer: int, post_id: int, pages: int = 20) -> bool:
    """The post on one of the viewer's first 20 pages (CHRONOLOGICAL, 50 a page: the curve's
    viewer of 200 authors has 400 posts)."""
    after = None
    for _ in range(pages):
        for attempt in range(DEGRADED_RETRIES + 1):
            page = (
                await client.call(
                    viewer, "Feed", {"first": 50, "mode": "CHRONOLOGICAL", "after": after}
                )
            )["feed"]
            if not page["degraded"]:
                break
            # A source past FEED_SOURCE_TIMEOUT_MS: the page says it is incomplete. Its load
            # goes on in the background; read again, and give up as unverified.
            if attempt == DEGRADED_RETRIES:
                raise Degraded(f"feed of {viewer} still degraded")
            await asyncio.sleep(0.5)
        ids = [int(e["node"]["id"]) for e in page["edges"]]
        if post_id in ids:
            return True
        if not page["pageInfo"]["hasNextPage"] or (ids and min(ids) < post_id):
            return False
        after = page["pageInfo"]["endCursor"]
    return False
