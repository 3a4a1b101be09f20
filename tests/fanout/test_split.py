"""The splitter: active followers into FanoutBatch jobs and a continuation job, with the
first page queued alone before the rest is read, the others in groups of JOB_PAGES pages,
each queued while the next is read."""

from __future__ import annotations

import asyncio
from typing import Any

from app.fanout import lanes
from app.fanout.service import JOB_PAGES, SPLIT_PAGES
from tests.helpers import db


async def _author_with_followers(n: int, inactive: set[int]) -> tuple[int, list[int]]:
    async with db() as conn:
        author = await conn.fetchval(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at) "
            "VALUES ('author', 'x', 'Author', now()) RETURNING id"
        )
        rows = await conn.fetch(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at) "
            "SELECT 'f' || g, 'x', 'F', now() - CASE WHEN g = ANY($2::int[]) "
            "THEN interval '90 days' ELSE interval '0' END "
            "FROM generate_series(1, $1) g RETURNING id",
            n,
            sorted(inactive),
        )
        followers = sorted(r["id"] for r in rows)
        await conn.copy_records_to_table(
            "follows",
            records=[(f, author) for f in followers],
            columns=["follower_id", "followee_id"],
        )
    return author, followers


async def test_pages_partition_the_active_followers(state) -> None:
    size = state.settings.fanout_batch_size
    total = SPLIT_PAGES * size + 3  # one continuation
    author, followers = await _author_with_followers(total + 2, inactive={1, 2})
    active = followers[2:]
    jobs: list[tuple[str, list[Any], str, str]] = []

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        # Kept by reference and read after the split: a page must not change once queued
        # (ARQ serializes a job's arguments a few round trips into enqueue_job).
        await asyncio.sleep(0)
        jobs.append((function, list(args), job_id, lane))

    entries = [[123, 456]]
    batches, count = await state.fanout.enqueue_pages(
        author, entries, lanes.DEFAULT, "fb:123", 0, enqueue
    )
    groups = sorted(args[2] for fn, args, _, _ in jobs if fn == lanes.FANOUT_BATCH)
    # The first page alone, then JOB_PAGES pages per job (the last group what is left).
    sizes = [size] + [JOB_PAGES * size] * ((SPLIT_PAGES - 1) // JOB_PAGES)
    if (SPLIT_PAGES - 1) % JOB_PAGES:
        sizes.append((SPLIT_PAGES - 1) % JOB_PAGES * size)
    assert (batches, count) == (len(sizes), SPLIT_PAGES * size)
    assert [len(g) for g in groups] == sizes
    assert [u for g in groups for u in g] == active[: SPLIT_PAGES * size]
    assert {job_id for fn, _, job_id, _ in jobs if fn == lanes.FANOUT_BATCH} == {
        f"fb:123:{g[0]}" for g in groups
    }
    [(_, args, job_id, lane)] = [j for j in jobs if j[0] == lanes.FANOUT_PAGES]
    last = active[SPLIT_PAGES * size - 1]
    assert (args[-1], job_id, lane) == (last, f"fb:123:from:{last}", lanes.DEFAULT)

    # The continuation picks up where the split stopped; a short tail needs no more.
    jobs.clear()
    assert await state.fanout.enqueue_pages(
        author, entries, lanes.DEFAULT, "fb:123", last, enqueue
    ) == (1, 3)
    assert [args[2] for _, args, _, _ in jobs] == [active[-3:]]
