"""A FanoutBatch whose writes no replica confirmed (TIMELINE_WAIT_REPLICAS, decision 0068),
on the tests' plain server, which has no replica: the batch writes, then fails before it
counts anyone or settles its tracking; its retry writes nothing twice and counts once.
The failover itself: tests/cluster/test_unreplicated_write.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from app.posts.ids import created_ms
from app.realtime import batch_counts, counts
from app.realtime.keys import count_key
from app.timelines.store import NotReplicated
from jobs import tracking
from tests.helpers import author_with_fans, post, timeline_ids


async def _counted(state: Any, user_id: int) -> list[int]:
    return [int(m) for m in await state.redis.zrange(count_key(user_id), 0, -1)]


@pytest.mark.parametrize("entries", [1, 2], ids=["one post (fused call)", "two posts"])
async def test_an_unconfirmed_batch_fails_before_counting_and_its_retry_adds_nothing_twice(
    client: Any, state: Any, entries: int
) -> None:
    token, author, made = await author_with_fans(client, 3)
    fans = [fan_id for _, fan_id in made]
    for fan in fans:
        await state.timelines.rebuild(fan, [])
    await counts.mark_online(state.redis, fans[:2], state.settings)
    posts = [await post(client, token, f"post {i}") for i in range(entries)]
    batch = [(p, created_ms(p)) for p in posts]
    settings = state.settings.model_copy(
        update={"timeline_wait_replicas": 1, "timeline_wait_ms": 20}
    )
    waiting = dataclasses.replace(state.fanout, settings=settings)
    waiting.notifier.online = batch_counts.OnlineUsers()  # a fresh guess: both online users known
    job = f"fb:{posts[-1]}:{fans[0]}"
    await tracking.owe(state.redis, posts[-1], [job], ttl=60)
    tail = tracking.settle_tail(posts[-1], job, tracking.Progress(written=3), ttl=60)

    with pytest.raises(NotReplicated, match="0 of 1 replicas"):
        await waiting.deliver(author, batch, fans, tail)
    # Written on the master, but nobody counted and the job still owed: not announced, and
    # ARQ runs it again.
    newest_first = sorted(posts, reverse=True)
    for fan in fans:
        assert await timeline_ids(state, fan) == newest_first
        assert await _counted(state, fan) == []
    assert tail.reply is None
    assert await state.redis.smembers(tracking.pending_key(posts[-1])) == {job.encode()}

    # The retry (here with a replica's confirmation not asked for): no entry twice, each
    # online fan counted once; one more run counts nothing more.
    for _ in range(2):
        assert await state.fanout.deliver(author, batch, fans) == 0
        for fan in fans:
            assert await timeline_ids(state, fan) == newest_first
        assert await _counted(state, fans[0]) == sorted(posts)
        assert await _counted(state, fans[1]) == sorted(posts)
        assert await _counted(state, fans[2]) == []  # offline


def test_the_wait_must_end_before_the_socket_times_out() -> None:
    """A WAIT longer than the socket timeout would fail as an outage, not as NotReplicated;
    with the wait off (0 replicas, the default) the bound does not apply."""
    from pydantic import ValidationError

    from app.config import Settings

    assert Settings(timeline_wait_replicas=1, timeline_wait_ms=1999).timeline_wait_ms == 1999
    with pytest.raises(ValidationError, match="TIMELINE_WAIT_MS must be below"):
        Settings(timeline_wait_replicas=1, timeline_wait_ms=2000)
    assert Settings(
        timeline_wait_ms=2000, redis_socket_timeout_seconds=0.5, redis_queue_wait_replicas=0
    ).timeline_wait_ms
    with pytest.raises(ValidationError):
        Settings(timeline_wait_replicas=-1)
    wider = Settings(
        timeline_wait_replicas=1, timeline_wait_ms=2500, redis_socket_timeout_seconds=3
    )
    assert wider.timeline_wait_ms == 2500
