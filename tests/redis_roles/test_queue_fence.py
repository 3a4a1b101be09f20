"""The queue on Sentinel without a failover (decision 0091; the failover itself:
test_queue_failover.py): the `redis+sentinel://` URL form and its refusals, and the relay's
fence on the test Redis, a master without replicas, where a WAIT for one replica is the
real thing a replica that never answers looks like."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import ValidationError

from app.config import Settings, parse_sentinel_url
from app.redis_client import QueueEpoch, QueueFence, QueueNotReplicated
from app.relay import OutboxRelay
from app.state import AppState
from jobs.connections import redis_settings
from tests.helpers import make_user, post, sql


def test_the_url_form() -> None:
    target = parse_sentinel_url("redis+sentinel://s1:26379,s2:26380,s3/queue?db=2&password=p%40ss")
    assert target.sentinels == (("s1", 26379), ("s2", 26380), ("s3", 26379))
    assert (target.master, target.db, target.password, target.ssl) == ("queue", 2, "p@ss", False)
    tls = parse_sentinel_url("rediss+sentinel://user:secret@[::1]:5000/queue/3")
    assert tls.sentinels == (("::1", 5000),)
    assert (tls.username, tls.password, tls.db, tls.ssl) == ("user", "secret", 3, True)


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://s1:26379",  # no master name
        "redis+sentinel:///queue",  # no Sentinel
        "redis+sentinel://s1:port/queue",
        "redis+sentinel://s1/queue?db=first",
    ],
)
def test_a_malformed_url_is_refused_naming_the_setting(url: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(redis_url="redis://127.0.0.1:6379/0", redis_queue_url=url)
    assert "REDIS_QUEUE_URL" in str(refused.value)
    with pytest.raises(ValidationError) as refused:
        Settings(redis_url=url)
    assert "REDIS_URL: " in str(refused.value)


def test_arq_is_told_the_sentinels() -> None:
    """`arq --check` and create_pool see the same master as the processes (ARQ's own
    Sentinel support); the workers themselves connect through jobs.connections.worker_pool."""
    settings = Settings(
        redis_url="redis://127.0.0.1:6379/0",
        redis_queue_url="redis+sentinel://s1:26379,s2:26379/queue?db=1&password=pw",
    )
    arq = redis_settings(settings)
    assert arq.sentinel and arq.sentinel_master == "queue"
    assert arq.host == [("s1", 26379), ("s2", 26379)]
    assert (arq.database, arq.password) == (1, "pw")


class OneReplicaWanted(QueueFence):
    """A fence that waits for a replica even though none is connected: what a replica that
    stopped acknowledging (before the master drops it) does to the relay."""

    async def begin(self) -> QueueEpoch:
        return dataclasses.replace(await super().begin(), replicas=1)


async def test_the_fence_on_a_master_without_replicas(state: AppState) -> None:
    fence = QueueFence(state.redis, replicas=1, timeout_ms=50)
    epoch = await fence.begin()
    assert epoch.replicas == 0  # none connected: nothing to wait for
    await fence.confirm(epoch)
    with pytest.raises(QueueNotReplicated, match="master changed"):
        await fence.confirm(dataclasses.replace(epoch, master_id="another master"))
    with pytest.raises(QueueNotReplicated, match="0 of 1 queue replicas"):
        await OneReplicaWanted(state.redis, 1, 50).confirm(dataclasses.replace(epoch, replicas=1))


async def test_the_relay_marks_events_only_once_the_fence_confirms(
    client: Any, state: AppState
) -> None:
    token, _ = await make_user(client, "author")
    await post(client, token, "kept until a replica holds its job")
    enqueued: list[str] = []

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        enqueued.append(job_id)

    async def unpublished() -> int:
        rows = await sql("SELECT count(*) AS n FROM outbox WHERE published_at IS NULL")
        return int(rows[0]["n"])

    pending = await unpublished()
    assert pending >= 1
    stuck = OutboxRelay(state.engine, enqueue, fence=OneReplicaWanted(state.redis, 1, 50))
    with pytest.raises(QueueNotReplicated):
        await stuck.publish_pending()
    assert await unpublished() == pending  # nothing marked: the next pass enqueues it again
    relay = OutboxRelay(state.engine, enqueue, fence=QueueFence(state.redis, 1, 50))
    assert await relay.publish_pending() == pending
    assert await unpublished() == 0
    assert len(enqueued) == 2 * len(set(enqueued))  # the same jobs, enqueued twice
