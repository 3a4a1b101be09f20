"""Bursts (issue 21): a mid-size author (below FANOUT_PULL_THRESHOLD, 10 in tests) whose
posting rate would blow the freshness budget goes PULL for the burst, and the control plane's
periodic pass (a real ARQ cron) brings it back to PUSH once the window has passed, pushing
what it posted meanwhile; every follower sees every post exactly once throughout, and an
ordinary author's posts reach their followers' timelines meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from arq.worker import Worker

from app.fanout import control, lanes
from app.fanout.__main__ import pin as pin_author
from jobs.worker import REVIEW, lane_settings
from tests.fanout.bursts import (
    FANS,
    WINDOW_SECONDS,
    age_follows,
    assert_every_post_once,
    burst_size,
)
from tests.helpers import (
    author_with_fans,
    eventually,
    fanout_mode,
    follow,
    full_scroll,
    make_user,
    post,
    timeline_ids,
)


async def test_a_burst_goes_pull_and_the_periodic_pass_brings_it_back_to_push(
    client, state, pipeline, short_window, monkeypatch
) -> None:
    burst = burst_size(short_window) + 2
    author, _, fans = await author_with_fans(client, FANS)
    ordinary, _ = await make_user(client, "ordinary")
    for token, _ in fans:
        await follow(client, token, "ordinary")
    await pipeline.settle()
    await age_follows(state)
    for token, _ in fans:
        await full_scroll(client, token, mode="CHRONOLOGICAL")  # timelines exist
    assert await fanout_mode(client, "author") == "PUSH"

    made: set[int] = set()
    plain: set[int] = set()
    for i in range(burst):
        made.add(await post(client, author, f"burst {i}"))
        if i % 5 == 0:  # an ordinary author: a post or two in the window
            plain.add(await post(client, ordinary, f"ordinary {i}"))
    await pipeline.settle()
    assert await fanout_mode(client, "author") == "PULL", "the burst did not go PULL"
    for _, fan_id in fans:  # the ordinary author's posts were pushed meanwhile
        assert plain <= set(await timeline_ids(state, fan_id))
    await age_follows(state)
    for token, _ in fans:
        await assert_every_post_once(client, token, made | plain)

    # The window passes; no post from the author: the periodic pass (a real cron, every
    # second here) decides again and switches it back, pushing the pull-era posts.
    # Only this worker runs the cron: the pipeline's burst workers would never drain.
    monkeypatch.setattr(short_window, "fanout_review_seconds", 1)
    settings = {**lane_settings(lanes.DEFAULT, 20), "poll_delay": 0.01}
    monkeypatch.setattr(short_window, "fanout_review_seconds", 0)
    worker = Worker(**settings, handle_signals=False)
    running = asyncio.ensure_future(worker.async_run())
    try:

        async def back_to_push() -> bool:
            return await fanout_mode(client, "author") == "PUSH"

        await eventually(back_to_push, within=WINDOW_SECONDS + 15, what="back to PUSH")
    finally:
        # Closing cancels a pass still running (ARQ's close then re-raises the cancellation):
        # as a crash would, possibly between the switch's commit and its catch-up's enqueue.
        with contextlib.suppress(asyncio.CancelledError):
            await worker.close()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    # The next pass finds a catch-up the closed worker left noted (or the queued one: same
    # job ids, nothing twice).
    await pipeline.arq.enqueue_job(REVIEW, _queue_name=lanes.DEFAULT)
    await pipeline.settle()  # the re-push batches (the big lane's, too)
    for _, fan_id in fans:  # the pull-era posts are in the timelines now
        assert made <= set(await timeline_ids(state, fan_id))
    await age_follows(state)
    for token, _ in fans:
        await assert_every_post_once(client, token, made | plain)

    # PUSH again: a new post is fanned out, and still no post is shown twice.
    later = await post(client, author, "after the burst")
    await pipeline.settle()
    assert await fanout_mode(client, "author") == "PUSH"
    for token, fan_id in fans:
        assert later in await timeline_ids(state, fan_id)
        await assert_every_post_once(client, token, made | plain | {later})


async def test_the_periodic_pass_can_be_enqueued_by_name_and_is_bounded(
    client, state, pipeline, short_window
) -> None:
    """With nothing to review it switches nobody; it runs as a job on the default lane."""
    await author_with_fans(client, 2)
    await pipeline.settle()
    job = await pipeline.arq.enqueue_job(REVIEW, _queue_name=lanes.DEFAULT)
    await pipeline.settle()
    assert await job.result(timeout=5) == 0
    assert await fanout_mode(client, "author") == "PUSH"


async def test_a_catch_up_lost_between_the_switch_and_its_enqueue_is_queued_by_the_next_pass(
    client, state, pipeline, short_window
) -> None:
    """The switch back to PUSH commits, then the process dies before queueing the posts made
    while PULL (here: the enqueue fails). The next decision for the author queues them."""
    token, author_id, fans = await author_with_fans(client, 3)
    await pipeline.settle()  # the follows' backfills, before any post
    await pin_author(state.sessions, state.redis, "author", "pull")
    pulled = {await post(client, token, f"pulled {i}") for i in range(2)}
    await pipeline.settle()
    assert await fanout_mode(client, "author") == "PULL"
    await pin_author(state.sessions, state.redis, "author", "auto")

    async def dies(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the worker died here")

    with pytest.raises(ExceptionGroup) as died:  # the enqueue runs in a task group
        await state.fanout.review_mode(author_id, dies)
    assert died.group_contains(ConnectionError)
    assert await fanout_mode(client, "author") == "PUSH"  # the switch committed
    await pipeline.settle()
    for _, fan_id in fans:
        assert not pulled & set(await timeline_ids(state, fan_id))  # nothing queued yet

    job = await pipeline.arq.enqueue_job(REVIEW, _queue_name=lanes.DEFAULT)
    await pipeline.settle()
    assert await job.result(timeout=5) == 0  # no switch this time, only the catch-up
    for _, fan_id in fans:
        assert pulled <= set(await timeline_ids(state, fan_id))
    # Done once: another pass queues nothing more.
    again = await pipeline.arq.enqueue_job(REVIEW, _queue_name=lanes.DEFAULT)
    await pipeline.settle()
    assert await again.result(timeout=5) == 0
    assert await control.pending_catchup(state.redis, author_id) is None
