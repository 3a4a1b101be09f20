"""Every job kind is reconciled or dead-lettered (issue 19): a follow backfill, an unfollow
or block cleanup and a post-change job that vanish from the queue (or whose ARQ key expired)
are re-run by the reconciler from the outbox; a job ARQ gives up on because its worker
stopped during every try ends as a dead letter. Real ARQ workers (tests/pipeline.py); the
faults are ARQ's own conditions (a job missing from the queue, an expired key, a try counter
past `max_tries`), nothing in the worker is patched."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from arq.constants import in_progress_key_prefix, job_key_prefix, retry_key_prefix
from arq.worker import Worker

from app.fanout import lanes
from app.outbox import events
from app.relay import jobs_for
from jobs import dead_letters, event_tracking, faults, marks
from jobs.worker import RECONCILE, lane_settings
from tests.helpers import (
    block,
    cli,
    eventually,
    follow,
    gql,
    make_user,
    post,
    sql,
    timeline_ids,
    unfollow,
)


@pytest.fixture
def faulty(state: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process workers read injected faults (jobs.faults) and retry quickly."""
    monkeypatch.setattr(state.faults, "job_fault_hook", True)
    monkeypatch.setattr(state.settings, "job_max_tries", 3)
    monkeypatch.setattr(state.settings, "job_retry_base_seconds", 0.02)


async def _event_jobs(event_type: str) -> list[str]:
    """The job ids the relay gave the events of this type, oldest event first."""
    rows = await sql("SELECT id, payload FROM outbox WHERE event_type = $1 ORDER BY id", event_type)
    return [
        job.job_id
        for row in rows
        for job in jobs_for(row["id"], event_type, json.loads(row["payload"]))
    ]


async def _lose(state: Any, job_id: str) -> None:
    """The job vanishes from the queue (a Redis restarted without persistence, a hand)."""
    assert await state.redis.zrem(lanes.DEFAULT, job_id) == 1
    assert await state.redis.delete(job_key_prefix + job_id) == 1


async def _expire(state: Any, job_id: str) -> None:
    """ARQ's key of the queued job expires (as after ARQ's default day in the queue): the
    worker that picks it stores 'job expired' and never calls the task."""
    await state.redis.pexpire(job_key_prefix + job_id, 1)

    async def gone() -> bool:
        return not await state.redis.exists(job_key_prefix + job_id)

    await eventually(gone, within=5, what="the job's key expired")


async def _reconcile(pipeline: Any) -> None:
    """One reconciler pass (grace 0: every relayed event is old enough), then its re-runs."""
    await pipeline.arq.enqueue_job(RECONCILE, 0)
    await pipeline.settle()


async def _cli(*args: str) -> str:
    return await cli("jobs.dead_letters", *args)


async def _follow_relayed(client: Any, pipeline: Any) -> tuple[int, int, str]:
    """`fan` follows `author` (who posted once): the follow's backfill job is relayed, not
    run. (the post's id, the fan's id, the job's id)"""
    author, _ = await make_user(client, "author")
    made = await post(client, author, "before the follow")
    fan, fan_id = await make_user(client, "fan")
    await pipeline.settle()
    await follow(client, fan, "author")
    await pipeline.relay.drain()
    [job_id] = await _event_jobs(events.FOLLOWED)
    return made, fan_id, job_id


@pytest.mark.parametrize("fault", [_lose, _expire], ids=["lost", "expired"])
async def test_a_lost_follow_backfill_is_rerun_by_the_reconciler(
    client: Any, state: Any, pipeline: Any, fault: Any
) -> None:
    author, _ = await make_user(client, "author")
    made = [await post(client, author, f"before the follow {i}") for i in range(3)]
    fan, fan_id = await make_user(client, "fan")
    await pipeline.settle()
    await follow(client, fan, "author")
    await pipeline.relay.drain()
    [job_id] = await _event_jobs(events.FOLLOWED)
    await fault(state, job_id)
    await pipeline.settle()
    assert await timeline_ids(state, fan_id) == []  # the backfill never ran

    await _reconcile(pipeline)
    assert await timeline_ids(state, fan_id) == list(reversed(made))
    assert await marks.attempts(state.redis, event_tracking.state_key(job_id)) == 1

    # Done now: the next pass re-runs nothing.
    await _reconcile(pipeline)
    assert await marks.attempts(state.redis, event_tracking.state_key(job_id)) == 1
    assert await dead_letters.count(state.redis) == 0


async def test_a_lost_unfollow_cleanup_is_rerun_by_the_reconciler(
    client: Any, state: Any, pipeline: Any
) -> None:
    author, _ = await make_user(client, "author")
    fan, fan_id = await make_user(client, "fan")
    await follow(client, fan, "author")
    made = [await post(client, author, f"while followed {i}") for i in range(3)]
    await pipeline.settle()
    assert await timeline_ids(state, fan_id) == list(reversed(made))

    await unfollow(client, fan, "author")
    await pipeline.relay.drain()
    [job_id] = await _event_jobs(events.UNFOLLOWED)
    await _lose(state, job_id)
    await pipeline.settle()
    assert await timeline_ids(state, fan_id) == list(reversed(made))  # never cleaned

    await _reconcile(pipeline)
    assert await timeline_ids(state, fan_id) == []
    assert await marks.attempts(state.redis, event_tracking.state_key(job_id)) == 1


async def test_a_lost_block_cleanup_is_rerun_alone(client: Any, state: Any, pipeline: Any) -> None:
    author, author_id = await make_user(client, "author")
    fan, fan_id = await make_user(client, "fan")
    await follow(client, fan, "author")
    await follow(client, author, "fan")
    by_author = await post(client, author, "from the author")
    by_fan = await post(client, fan, "from the fan")
    await pipeline.settle()
    assert await timeline_ids(state, fan_id) == [by_author]
    assert await timeline_ids(state, author_id) == [by_fan]

    await block(client, author, "fan")
    await pipeline.relay.drain()
    [blocker_side, blocked_side] = await _event_jobs(events.BLOCKED)
    await _lose(state, blocked_side)  # fan's timeline keeps the author's post
    await pipeline.settle()
    assert await timeline_ids(state, author_id) == []
    assert await timeline_ids(state, fan_id) == [by_author]

    await _reconcile(pipeline)
    assert await timeline_ids(state, fan_id) == []
    assert await marks.attempts(state.redis, event_tracking.state_key(blocked_side)) == 1
    # it had run
    assert await marks.attempts(state.redis, event_tracking.state_key(blocker_side)) == 0


async def test_a_lost_post_change_job_is_reconciled(client: Any, state: Any, pipeline: Any) -> None:
    author, author_id = await make_user(client, "author")
    kept = await post(client, author, "kept")
    doomed = await post(client, author, "deleted")
    await pipeline.settle()

    async def indexed() -> list[int]:
        return [pid for pid, _ in await state.timelines.author_latest(author_id, 100)]

    assert await indexed() == [doomed, kept]
    (await gql(client, "DeletePost", {"id": str(doomed)}, token=author)).ok()
    await pipeline.relay.drain()
    [job_id] = await _event_jobs(events.POST_DELETED)
    await _lose(state, job_id)
    await pipeline.settle()
    assert await indexed() == [doomed, kept]  # the author index still lists it

    await _reconcile(pipeline)
    assert await indexed() == [kept]
    assert await marks.attempts(state.redis, event_tracking.state_key(job_id)) == 1


async def test_a_pass_checks_a_bounded_number_of_events_and_the_next_goes_on(
    client: Any, state: Any, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state.settings, "reconcile_max_events", 2)
    author, _ = await make_user(client, "author")
    made = await post(client, author, "before the follows")  # event 1
    fans = [await make_user(client, f"fan{i}") for i in range(2)]
    await pipeline.settle()
    for token, _ in fans:
        await follow(client, token, "author")  # events 2 and 3
    await pipeline.relay.drain()
    for job_id in await _event_jobs(events.FOLLOWED):
        await _lose(state, job_id)
    await pipeline.settle()

    await _reconcile(pipeline)  # events 1 and 2
    assert [await timeline_ids(state, fan_id) for _, fan_id in fans] == [[made], []]
    await _reconcile(pipeline)  # event 3, the end of the window
    assert [await timeline_ids(state, fan_id) for _, fan_id in fans] == [[made], [made]]
    await _reconcile(pipeline)  # from the start again: nothing left to re-run
    for job_id in await _event_jobs(events.FOLLOWED):
        assert await marks.attempts(state.redis, event_tracking.state_key(job_id)) == 1


async def test_an_event_job_failing_every_rerun_ends_as_a_dead_letter(
    client: Any, state: Any, pipeline: Any, faulty: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state.settings, "reconcile_max_attempts", 1)
    made, fan_id, job_id = await _follow_relayed(client, pipeline)
    await _lose(state, job_id)
    await faults.fail_next(state.redis, lanes.BACKFILL_FOLLOW, 100)  # and every run fails

    await _reconcile(pipeline)  # re-run once: it fails every try (a dead letter of its own)
    await _reconcile(pipeline)  # past RECONCILE_MAX_ATTEMPTS: given up, a dead letter
    await _reconcile(pipeline)  # and not re-run every minute after that
    assert await timeline_ids(state, fan_id) == []
    letters = await dead_letters.all_letters(state.redis)
    assert [(d.job_id, d.function) for d in letters] == [
        (f"{job_id}:r1", lanes.BACKFILL_FOLLOW),
        (f"{job_id}:r2", lanes.BACKFILL_FOLLOW),
    ]
    assert "reconciler" in letters[1].error
    listed = await _cli("list")
    assert all(d.job_id in listed for d in letters)
    assert await marks.attempts(state.redis, event_tracking.state_key(job_id)) == 2

    await state.redis.delete(faults.fail_key(lanes.BACKFILL_FOLLOW))  # the bug is fixed
    await _cli("replay", "--all")
    await pipeline.settle()
    assert await timeline_ids(state, fan_id) == [made]
    assert await dead_letters.count(state.redis) == 0


async def test_a_job_whose_worker_stops_in_every_try_is_a_dead_letter(
    client: Any, state: Any, pipeline: Any, faulty: None
) -> None:
    made, fan_id, job_id = await _follow_relayed(client, pipeline)

    # Its workers stopped during every try but the last (ARQ counts a try at each start)...
    settings = lane_settings(lanes.DEFAULT, max_jobs=20)
    arq_max_tries = settings["max_tries"]
    await state.redis.set(retry_key_prefix + job_id, arq_max_tries - 1)
    # ...and during the last one too: a worker stopped (ARQ cancels its running jobs, which
    # counts as a try) while the job runs.
    await faults.stall(state.redis, lanes.BACKFILL_FOLLOW)
    worker = Worker(**{**settings, "poll_delay": 0.01}, handle_signals=False)
    running = asyncio.ensure_future(worker.async_run())

    async def stalled() -> bool:
        return await faults.stalled(state.redis, lanes.BACKFILL_FOLLOW) == 1

    await eventually(stalled, within=15, what="the last try running")
    await worker.close()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    await faults.stall(state.redis, lanes.BACKFILL_FOLLOW, on=False)
    assert await state.redis.exists(job_key_prefix + job_id)  # ARQ will look at it once more
    assert not await state.redis.exists(in_progress_key_prefix + job_id)

    # ARQ's next look: past max_tries, it fails the job without calling it.
    await pipeline.settle()
    assert not await state.redis.exists(job_key_prefix + job_id)
    assert await timeline_ids(state, fan_id) == []
    [letter] = await dead_letters.all_letters(state.redis)
    assert (letter.job_id, letter.function, letter.tries) == (
        job_id,
        lanes.BACKFILL_FOLLOW,
        arq_max_tries,
    )
    listed = await _cli("list")
    assert job_id in listed and lanes.BACKFILL_FOLLOW in listed

    assert await _cli("replay", job_id) == f"replayed {job_id}\n"
    await pipeline.settle()
    assert await timeline_ids(state, fan_id) == [made]
    assert await dead_letters.count(state.redis) == 0
