"""Re-widening a post (PRIVATE -> PUBLIC/FOLLOWERS again and again; issue 33), through
GraphQL over HTTP and the real ARQ workers (tests.pipeline):

- each widening fans out at most once per (post, version): a widening overtaken by a later
  one before its fan-out ran writes nothing, a replayed event nothing;
- at most FANOUT_WIDENINGS_PER_POST_PER_HOUR (3) widenings of one post fan out an hour; a
  further widening is refused with RATE_LIMITED and `retryAfter` (narrowing never is);
- widenings count as posts in the author's posting-rate window, so an author toggling posts
  goes PULL as one posting as often would (the cost model sees the fan-outs).

Timeline writes are counted as the fan-out's page writes (`feed_post_to_timeline_seconds`
observations: one per script call a batch or a split sends), since re-writing a post a
timeline already holds gains no entry (`feed_timeline_inserts_total` stays put) but costs
the same calls.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from app.config import get_settings
from app.fanout import lanes
from jobs.worker import REVIEW
from tests.fanout.bursts import (
    FANS,
    WINDOW_SECONDS,
    age_follows,
    assert_every_post_once,
    burst_size,
)
from tests.helpers import (
    author_with_fans,
    fanout_mode,
    feed_ids,
    follow,
    gql,
    make_user,
    metric_value,
    post,
    quick_users,
    sql,
    timeline_ids,
)

LIMIT = 3  # the documented default of FANOUT_WIDENINGS_PER_POST_PER_HOUR
WRITES = "feed_post_to_timeline_seconds_count"
# More than 1 + JOB_PAGES pages of followers (batches of 4 in tests): the split writes the
# pages itself (decisions 0060, 0064), as for a real author of 8,000-50,000 followers.
MANY = 40


@pytest.fixture
def push_at_many(monkeypatch: pytest.MonkeyPatch) -> Any:
    """An author of MANY followers stays PUSH (the tests' thresholds would make it PULL)."""
    settings = get_settings()
    monkeypatch.setattr(settings, "fanout_pull_threshold", 1000)
    monkeypatch.setattr(settings, "fanout_push_threshold", 800)
    return settings


async def author_with_many_fans(client: Any, state: Any, pipeline: Any) -> tuple[str, list[Any]]:
    """The author's token and MANY fans (token, id), each with a timeline."""
    author, _ = await make_user(client, "author")
    fans = await quick_users(state, [f"fan{i}" for i in range(MANY)])
    for token, _ in fans:
        await follow(client, token, "author")
    await pipeline.settle()
    for token, _ in fans:
        await feed_ids(client, token)  # timelines exist (fan-out skips missing ones)
    assert await fanout_mode(client, "author") == "PUSH"
    return author, fans


async def page_writes(client: Any) -> float:
    return metric_value((await client.get("/metrics")).text, WRITES, default=0.0)


async def set_visibility(client: Any, token: str, post_id: int, visibility: str) -> Any:
    variables = {"id": str(post_id), "visibility": visibility}
    return await gql(client, "SetPostVisibility", variables, token=token)


async def visible_to(client: Any, token: str | None, post_id: int) -> bool:
    data = (await gql(client, "Post", {"id": str(post_id)}, token=token)).ok()
    return data["post"] is not None


async def test_a_widening_overtaken_or_replayed_fans_out_once(
    client, state, pipeline, push_at_many
) -> None:
    author, fans = await author_with_many_fans(client, state, pipeline)
    once = await post(client, author, "measured", visibility="PRIVATE")
    await pipeline.settle()
    before = await page_writes(client)
    (await set_visibility(client, author, once, "PUBLIC")).ok()
    await pipeline.settle()
    per_fanout = await page_writes(client) - before
    assert per_fanout > 0
    for _, uid in fans:
        assert once in await timeline_ids(state, uid)

    toggled = await post(client, author, "toggled before its fan-out ran", visibility="PRIVATE")
    await pipeline.settle()
    before = await page_writes(client)
    # Widened, narrowed and widened again before the workers ran: one fan-out, the last.
    (await set_visibility(client, author, toggled, "PUBLIC")).ok()
    (await set_visibility(client, author, toggled, "PRIVATE")).ok()
    (await set_visibility(client, author, toggled, "FOLLOWERS")).ok()
    await pipeline.settle()
    assert await page_writes(client) - before == per_fanout
    for _, uid in fans:
        assert toggled in await timeline_ids(state, uid)

    # Every event replayed (the relay's at-least-once): nothing is fanned out again.
    await sql("UPDATE outbox SET published_at = NULL")
    await pipeline.settle()
    assert await page_writes(client) - before == per_fanout


async def test_re_widening_one_post_is_bounded_per_hour(
    client, state, pipeline, push_at_many
) -> None:
    author, fans = await author_with_many_fans(client, state, pipeline)
    stranger_token, _ = await make_user(client, "stranger")
    pid = await post(client, author, "toggled all day", visibility="PRIVATE")
    await pipeline.settle()

    before = await page_writes(client)
    refused = None
    for i in range(LIMIT + 3):
        widened = await set_visibility(client, author, pid, "PUBLIC")
        if i < LIMIT:
            widened.ok()
            await pipeline.settle()
            assert await visible_to(client, stranger_token, pid)
        else:
            # Past the bound: refused, typed, with the wait; the post stays PRIVATE.
            assert widened.codes == ["RATE_LIMITED"], (i, widened.errors)
            refused = widened.errors[0]
            assert 0 < refused["extensions"]["retryAfter"] <= 3600
            assert not await visible_to(client, stranger_token, pid)
        # Narrowing is never refused.
        (await set_visibility(client, author, pid, "PRIVATE")).ok()
        await pipeline.settle()
    assert refused is not None
    writes = await page_writes(client) - before
    first = writes / LIMIT
    assert writes == LIMIT * first  # LIMIT fan-outs, not one per widening

    # Other posts of the author are not held by this one's bound.
    other = await post(client, author, "another", visibility="PRIVATE")
    (await set_visibility(client, author, other, "PUBLIC")).ok()

    # An hour later the post may be widened (and fanned out) again.
    await sql("UPDATE post_widenings SET widened_at = widened_at - interval '61 minutes'")
    (await set_visibility(client, author, pid, "FOLLOWERS")).ok()
    await pipeline.settle()
    for token, uid in fans:
        assert pid in await timeline_ids(state, uid)
        assert await visible_to(client, token, pid)


async def test_widenings_count_in_the_posting_rate_window(
    client,
    state,
    pipeline,
    short_window,
) -> None:
    """An author whose posts were made PRIVATE and whose posting window is empty widens more
    posts than a burst within the window: the cost model takes them for posts and goes PULL,
    and every follower still sees every widened post once."""
    burst = burst_size(short_window) + 2
    author, _, fans = await author_with_fans(client, FANS)
    await pipeline.settle()
    await age_follows(state)
    for token, _ in fans:
        await feed_ids(client, token)
    assert await fanout_mode(client, "author") == "PUSH"
    made = [await post(client, author, f"private {i}", visibility="PRIVATE") for i in range(burst)]
    await pipeline.settle()
    await asyncio.sleep(WINDOW_SECONDS + 0.5)  # their creation leaves the posting window
    # (Made PULL by their creation: the periodic pass brings the author back to PUSH.)
    await pipeline.arq.enqueue_job(REVIEW, _queue_name=lanes.DEFAULT)
    await pipeline.settle()
    assert await fanout_mode(client, "author") == "PUSH"

    before = await page_writes(client)
    (await set_visibility(client, author, made[0], "PUBLIC")).ok()
    await pipeline.settle()
    per_fanout = await page_writes(client) - before
    assert per_fanout > 0
    for pid in made[1:]:
        (await set_visibility(client, author, pid, "PUBLIC")).ok()
        await pipeline.settle()
    assert await fanout_mode(client, "author") == "PULL", "widenings were not counted"
    # Fewer fan-outs than widenings: the ones past the burst were pulled, not pushed.
    assert await page_writes(client) - before < burst * per_fanout
    await age_follows(state)
    for token, _ in fans:
        await assert_every_post_once(client, token, set(made))
