"""The fan-out's graph jobs: what a follow, an unfollow or block, a returning user and a
changed post do to timelines and live counts (backfill, cleanup, rebuild, post-changed,
withdraw). Each reads PostgreSQL first and is idempotent, so a replay or retry changes
nothing more."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.models import FANOUT_PULL, Follow, Post, User, Visibility
from app.fanout import constants
from app.fanout.notifier import FanoutNotifier
from app.fanout.queries import active_since, followers
from app.posts.queries import author_posts, followee_posts
from app.timelines.store import TimelineStore


@dataclass
class GraphJobs:
    """Timelines and counts following the social graph and post changes."""

    sessions: async_sessionmaker[AsyncSession]
    store: TimelineStore
    settings: Settings
    notifier: FanoutNotifier | None = None

    async def backfill_follow(self, follower_id: int, followee_id: int) -> int:
        """Followed: copy the author's newest posts into the follower's timeline."""
        async with self.sessions() as session:
            if not await _follows(session, follower_id, followee_id):
                return 0  # unfollowed again before we ran
            if await session.scalar(select(User.fanout_mode).where(User.id == followee_id)) == (
                FANOUT_PULL
            ):
                return 0  # read from posts:{author} at read time; no per-follower copies
            entries = await author_posts(session, followee_id, self.settings.backfill_posts)
        if entries:
            await self.store.push_entries(follower_id, entries)
        return len(entries)

    async def cleanup_author(self, user_id: int, author_id: int) -> int:
        """Unfollowed/blocked: remove the author's posts from the user's timeline."""
        async with self.sessions() as session:
            if await _follows(session, user_id, author_id):
                return 0  # followed again before we ran
            ids = [pid for pid, _ in await self.store.latest(user_id, self.settings.timeline_max)]
            if not ids:
                return 0
            rows = await session.execute(
                select(Post.id).where(Post.id.in_(ids), Post.author_id == author_id)
            )
            doomed = [r[0] for r in rows]
        if doomed:
            await self.store.remove_posts(user_id, doomed)
        return len(doomed)

    async def rebuild_timeline(self, user_id: int) -> int:
        """Cold start: a bounded timeline from Postgres, merged (never replacing pushes)."""
        limit = self.settings.timeline_max
        started = datetime.now(UTC)
        since = active_since(self.settings.active_days)
        async with self.sessions() as session:
            entries = await followee_posts(session, user_id, limit, since)
        keep_ms = int((started - constants.REBUILD_CATCH_UP).timestamp() * 1000)
        await self.store.rebuild(user_id, entries, keep_since_ms=keep_ms)
        async with self.sessions() as session:
            late = await followee_posts(
                session, user_id, limit, started - constants.REBUILD_CATCH_UP
            )
        if late:
            await self.store.push_entries(user_id, late)
        return len(entries)

    async def post_changed(self, post_id: int) -> None:
        """Timelines hold ids and readers read bodies with the rows, so an edit changes
        nothing here; a delete leaves the author index (readers re-check every id anyway:
        this only saves them work). A post that no longer reaches followers (deleted, or
        PRIVATE now, or restricted in a region: decision 0088) leaves their live counts. The
        row is read now, not from the event, so
        a narrowing undone before this ran (PRIVATE, then FOLLOWERS again) lowers nothing;
        every step is idempotent, so a retried or replayed job changes nothing more."""
        async with self.sessions() as session:
            row = (
                await session.execute(
                    select(
                        Post.author_id, Post.deleted_at, Post.visibility, Post.restricted_regions
                    ).where(Post.id == post_id)
                )
            ).one_or_none()
        if row is None:
            return
        deleted = row.deleted_at is not None
        if deleted:
            await self.store.remove_author_post(row.author_id, post_id)
        if deleted or row.visibility == Visibility.PRIVATE or row.restricted_regions:
            await self.withdraw_from_counts(row.author_id, post_id, final=deleted)

    async def withdraw_from_counts(self, author_id: int, post_id: int, *, final: bool) -> int:
        """Take the post out of the live counts of every follower of its author. Every
        follower, active or not: a pull-mode post is counted for any follower with a socket,
        and a count outlives the socket. Counts hold the post only for followers (an unfollow
        or block removed it), and removing it where it is absent changes nothing.

        WITHDRAW_PAGE followers per query; the next page is read while Redis lowers the
        current one. Measured on a loaded 2-core machine: 100,000 followers in 0.4-1.0 s,
        1,000,000 in 9.6-9.9 s (pages of 1,000 read one after the other: 1.8 s and 21 s).
        Returns the followers visited."""
        notifier = self.notifier
        if notifier is None:
            return 0
        visited = 0
        async with self.sessions() as session:
            page = await followers(session, author_id, 0, constants.WITHDRAW_PAGE)
            while page:
                visited += len(page)
                lowering = notifier.withdrawn([post_id], page, final=final)
                if len(page) < constants.WITHDRAW_PAGE:
                    await lowering
                    break
                async with asyncio.TaskGroup() as both:  # a failure cancels the other
                    both.create_task(lowering)
                    reading = both.create_task(
                        followers(session, author_id, page[-1], constants.WITHDRAW_PAGE)
                    )
                page = reading.result()
        return visited


async def _follows(session: AsyncSession, follower_id: int, followee_id: int) -> bool:
    found = await session.scalar(
        select(Follow.follower_id).where(
            Follow.follower_id == follower_id, Follow.followee_id == followee_id
        )
    )
    return found is not None
