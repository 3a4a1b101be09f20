"""The splitter: active followers into FanoutBatch jobs and a continuation job, with the
first page queued alone before the rest is read, the others in groups of JOB_PAGES pages,
each queued while the next is read; a long fan-out's split (given a way to deliver) writes
every group itself (decision 0064)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.fanout import constants, lanes
from app.fanout.constants import JOB_PAGES, SPLIT_PAGES
from app.posts.ids import created_ms
from tests.helpers import db, post_id_at


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


@pytest.mark.parametrize("keep_all", [True, False])
async def test_a_delivering_split_starts_small_and_keeps_its_groups(
    state, monkeypatch, keep_all: bool
) -> None:
    """With a way to deliver: the first read is KEPT_FIRST_READ followers, then groups of
    JOB_PAGES pages; with `keep_all` (an author of one planning job, decision 0064) every
    group is written by the planning job itself and only the continuation is queued, else
    the first read and the last group when no continuation follows (decision 0060)."""
    size = state.settings.fanout_batch_size
    monkeypatch.setattr(constants, "KEPT_FIRST_READ", size - 1)
    total = SPLIT_PAGES * size + 3  # one continuation
    author, followers = await _author_with_followers(total, inactive=set())
    jobs: list[tuple[str, list[Any], str, str]] = []
    written: list[list[int]] = []

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        jobs.append((function, list(args), job_id, lane))

    class Kept:
        """The planning job's account of the pages it wrote (here: which)."""

        async def written(self, user_ids: list[int], lane: str) -> None:
            assert lane == lanes.BIG
            await asyncio.sleep(0)
            written.append(list(user_ids))

    post_id = post_id_at(1_700_000_000_000)  # (no timeline exists: the writes change nothing)
    batches, count = await state.fanout.enqueue_pages(
        author,
        [[post_id, created_ms(post_id)]],
        lanes.BIG,
        "fb:123",
        0,
        enqueue,
        Kept(),
        keep_all=keep_all,
    )
    rest = SPLIT_PAGES * size - (size - 1)
    sizes = [size - 1] + [JOB_PAGES * size] * (rest // (JOB_PAGES * size))
    if rest % (JOB_PAGES * size):
        sizes.append(rest % (JOB_PAGES * size))
    assert (batches, count) == (len(sizes), SPLIT_PAGES * size)
    queued = [args[2] for fn, args, _, _ in jobs if fn == lanes.FANOUT_BATCH]
    if keep_all:
        assert (sorted(len(g) for g in written), queued) == (sorted(sizes), [])
    else:
        # The first read only: the last group is not the last (a continuation follows).
        assert [len(g) for g in written] == sizes[:1]
        assert sorted(len(g) for g in queued) == sorted(sizes[1:])
    assert sorted(u for g in written + queued for u in g) == followers[: SPLIT_PAGES * size]
    [(function, args, job_id, _)] = [j for j in jobs if j[0] != lanes.FANOUT_BATCH]
    last = followers[SPLIT_PAGES * size - 1]
    assert (function, args[-1], job_id) == (lanes.FANOUT_PAGES, last, f"fb:123:from:{last}")
