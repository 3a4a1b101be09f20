"""Several outbox relays side by side (issue 23: the relay "safe with several instances",
claimed by app/relay.py's FOR UPDATE SKIP LOCKED, tested here): two relays, each with
its own engine, drain concurrently while posts are being created; every event is enqueued by
exactly one of them, both share the work, and every follower ends with every post once."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from app.config import get_settings
from app.db.engine import make_engine
from app.relay import OutboxRelay
from tests.helpers import author_with_fans, full_scroll, post, sql

POSTS = 120


async def test_two_relays_share_the_outbox_and_publish_each_event_once(
    client, state, pipeline
) -> None:
    token, _, fans = await author_with_fans(client, 3)
    await pipeline.settle()  # the follows, before the race
    enqueued: Counter[str] = Counter()
    by_relay: Counter[str] = Counter()

    def recording(name: str) -> Any:
        async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
            enqueued[job_id] += 1
            by_relay[name] += 1
            await asyncio.sleep(0.001)  # a round trip's worth: claims overlap in time
            await pipeline.enqueue(function, *args, job_id=job_id, lane=lane)

        return enqueue

    engines = [make_engine(get_settings(), pool_size=2) for _ in range(2)]
    relays = [
        OutboxRelay(engine, recording(f"relay{i}"), batch_size=8)
        for i, engine in enumerate(engines)
    ]
    writing = asyncio.Event()

    async def relay_until_done(relay: OutboxRelay) -> None:
        while writing.is_set() or await relay.publish_pending():
            await relay.publish_pending()
            await asyncio.sleep(0)

    made: list[int] = []
    try:
        writing.set()
        running = [asyncio.ensure_future(relay_until_done(r)) for r in relays]
        for i in range(POSTS):
            made.append(await post(client, token, f"post {i}"))
        writing.clear()
        await asyncio.gather(*running)
    finally:
        for engine in engines:
            await engine.dispose()

    unpublished = await sql("SELECT count(*) FROM outbox WHERE published_at IS NULL")
    assert unpublished[0][0] == 0
    assert len(enqueued) == POSTS  # one job per post event...
    assert set(enqueued.values()) == {1}, "an event was enqueued by both relays"  # ...once
    assert min(by_relay["relay0"], by_relay["relay1"]) > 0, f"one relay did all: {by_relay}"

    await pipeline.settle()
    for fan, _ in fans:
        shown = await full_scroll(client, fan, mode="CHRONOLOGICAL", first=50)
        assert sorted(shown, reverse=True) == sorted(made, reverse=True)  # each once
