"""The FanoutBatch write: one post (or a catch-up's several) into a page of followers'
timelines, their live counts, and the durability wait (decisions 0049, 0054, 0059, 0068).
The timeline store owns the write; on one standalone server the counts and the job's
tracking step ride in it as tails (`app.timelines.tails`, decision 0070). Every step is
idempotent: a replayed or retried batch adds no entry and no count twice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.fanout import constants
from app.fanout.notifier import FanoutNotifier, FusingNotifier
from app.fanout.queries import reaching_posts
from app.observability.metrics import POST_TO_TIMELINE, TIMELINE_INSERTS
from app.timelines.store import TimelineStore
from app.timelines.tails import Tail


@dataclass
class BatchWriter:
    """What a FanoutBatch job (and a planning job's kept pages) writes."""

    sessions: async_sessionmaker[AsyncSession]
    store: TimelineStore
    settings: Settings
    notifier: FanoutNotifier | None = None

    async def deliver(
        self,
        author_id: int,
        entries: Sequence[Sequence[int]],
        user_ids: Sequence[int],
        tail: Tail | None = None,
    ) -> int:
        """FanoutBatch: one server-side script call per post and page (FANOUT_BATCH_SIZE
        users, at most the store's `script_batch`) of the job; a post's own job (one entry)
        on one standalone server: its live counts in the same calls, and `tail` (the job's
        tracking) in the last one, sent once the others succeeded; `tail.reply` stays None
        when it did not run.

        With TIMELINE_WAIT_REPLICAS, the writes are confirmed on the masters' replicas
        (`_confirm_replicated`) before anything more is counted and before the job may
        complete (decision 0068); the tracking tail then never rides in the insert (the
        caller settles once this returns)."""
        notifier = self.notifier
        if (
            len(entries) == 1
            and isinstance(notifier, FusingNotifier)
            and notifier.fuses_with(self.store)
        ):
            if self.settings.timeline_wait_replicas:
                tail = None  # settled by the caller, after the WAIT
            return await self._deliver_fused(notifier, author_id, entries, user_ids, tail)
        # Every post of the job in one pass per page (a catch-up carries many; decision 0059).
        written = await self.store.push_posts_to_timelines(
            [(int(post_id), int(score)) for post_id, score in entries], user_ids
        )
        await self._confirm_replicated(user_ids)
        for _, score in entries:
            POST_TO_TIMELINE.observe(max(0.0, time.time() - score / 1000))
        TIMELINE_INSERTS.inc(written)
        if self.notifier is not None:
            # Checked after the timeline writes, right before counting: a post deleted or
            # made PRIVATE while this batch waited (queue lag) is not announced. Readers
            # filter the timeline entry; a count would stay until the next first page.
            async with self.sessions() as session:
                alive = await reaching_posts(session, [int(e[0]) for e in entries])
            counted = [e for e in entries if int(e[0]) in alive]
            if counted:
                await self.notifier.delivered(author_id, counted, user_ids)
        return written

    async def _deliver_fused(
        self,
        notifier: FusingNotifier,
        author_id: int,
        entries: Sequence[Sequence[int]],
        user_ids: Sequence[int],
        tail: Tail | None,
    ) -> int:
        """One EVALSHA per page for the insert and the counts (decision 0049), up to
        DELIVER_IN_FLIGHT at a time, the last page (with `tail`) after the others (decision
        0054: a job whose insert fails is not settled). The post's SQL check (deleted or
        PRIVATE since: not announced) runs once per job, and only when a recipient is
        probably online: most jobs count nobody and skip it. Online users the guess missed
        come back and are counted the old way, after the same check. With
        TIMELINE_WAIT_REPLICAS nobody is counted in the calls: every online user comes back
        and is counted once the writes are confirmed on the replicas."""
        ids = [int(u) for u in user_ids]
        post_id, score_ms = int(entries[0][0]), int(entries[0][1])
        waits = bool(self.settings.timeline_wait_replicas)
        guessed: set[int] = set() if waits else set(await notifier.online_guess(ids))
        alive: bool | None = None
        if guessed:
            alive = await self._reaches(entries)
        # The split's pages (FANOUT_BATCH_SIZE), at most one call's keys as the store's.
        size = min(self.settings.fanout_batch_size, self.store.script_batch)
        pages = [ids[i : i + size] for i in range(0, len(ids), size)] or [ids]
        gate = asyncio.Semaphore(constants.DELIVER_IN_FLIGHT)

        async def page(chunk: list[int], with_tail: Tail | None) -> tuple[int, list[int]]:
            async with gate:  # (the tail reads the clock when its call goes out)
                count = notifier.count_tail(
                    author_id,
                    entries[0],
                    chunk,
                    [u for u in chunk if u in guessed] if guessed else [],
                    counting=bool(alive),
                )
                tails = [count] if with_tail is None else [count, with_tail]
                gained = await self.store.push_with_tails(post_id, score_ms, chunk, tails)
            return gained, notifier.missed(count, chunk)

        done: list[tuple[int, list[int]]] = []
        if len(pages) > 1:
            try:
                async with asyncio.TaskGroup() as calls:
                    running = [calls.create_task(page(chunk, None)) for chunk in pages[:-1]]
            except ExceptionGroup as failed:
                raise failed.exceptions[0] from None  # the job fails as one call would
            done = [r.result() for r in running]
        done.append(await page(pages[-1], tail))
        await self._confirm_replicated(ids)
        written = sum(w for w, _ in done)
        missed = [u for _, m in done for u in m]
        POST_TO_TIMELINE.observe(max(0.0, time.time() - int(entries[0][1]) / 1000))
        TIMELINE_INSERTS.inc(written)
        if missed and (alive if alive is not None else await self._reaches(entries)):
            await notifier.delivered(author_id, entries, missed)
        return written

    async def _confirm_replicated(self, user_ids: Sequence[int]) -> None:
        """TIMELINE_WAIT_REPLICAS replicas of every master the batch wrote to hold its writes
        (WAIT), else NotReplicated fails the batch. Its retry repeats nothing (an id already
        in a timeline is not added again, a live count is a zset of post ids) and waits
        again: on every try, one that wrote nothing too, since a master killed before its
        replica had an earlier try's writes loses them while the job is done (decision 0068).
        """
        replicas = self.settings.timeline_wait_replicas
        if replicas:
            await self.store.confirm_replicated(user_ids, replicas, self.settings.timeline_wait_ms)

    async def _reaches(self, entries: Sequence[Sequence[int]]) -> bool:
        """Does the (one) post still reach followers (not deleted, not PRIVATE)?"""
        async with self.sessions() as session:
            alive = await reaching_posts(session, [int(e[0]) for e in entries])
        return int(entries[0][0]) in alive
