"""The service-level metrics of issue 22 (decision 0023), each moved by what drives it:
post-to-first-visible and post-to-95%-visible per lane (counted where fan-out batches
complete, once per post whatever is retried or replayed), empty pages, page duplicates (an
invariant: 0 over whole scrolls), hydration batch sizes, pull-source latency and readiness.
Real workers (the `pipeline` fixture), /metrics read over HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.config import get_settings
from app.fanout import constants as fanout_constants
from app.fanout import lanes
from app.posts.ids import created_ms
from app.state import create_state
from app.web import create_app
from jobs import dead_letters, faults, marks, tracking
from tests.helpers import (
    author_with_fans,
    feed_ids,
    full_scroll,
    gql,
    make_user,
    metric_value,
    post,
    quick_users,
    timeline_ids,
)
from tests.servers import free_port

FIRST = "feed_post_first_visible_seconds"
P95 = "feed_post_visible_95_seconds"


async def _metrics(client: httpx.AsyncClient) -> str:
    return (await client.get("/metrics")).text


async def _visible(client: httpx.AsyncClient, lane: str) -> tuple[float, float]:
    """(first-visible observations, 95%-visible observations) in `lane` so far."""
    text = await _metrics(client)
    return (
        metric_value(text, f'{FIRST}_count{{lane="{lane}"}}'),
        metric_value(text, f'{P95}_count{{lane="{lane}"}}'),
    )


@pytest.fixture
def faulty(state: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process workers read injected faults and retry after ~20 ms, 40 ms..."""
    monkeypatch.setattr(state.faults, "job_fault_hook", True)
    monkeypatch.setattr(state.settings, "job_max_tries", 3)
    monkeypatch.setattr(state.settings, "job_retry_base_seconds", 0.02)


async def test_a_post_is_first_and_95_percent_visible_once_whatever_runs_again(
    client: httpx.AsyncClient, state: Any, pipeline: Any, faulty: None
) -> None:
    token, author_id, fans = await author_with_fans(client, 5)  # batches of 4 and 1
    await pipeline.settle()
    before = await _visible(client, "default")
    text = await _metrics(client)
    sums = (
        metric_value(text, f'{FIRST}_sum{{lane="default"}}'),
        metric_value(text, f'{P95}_sum{{lane="default"}}'),
    )
    await faults.fail_next(state.redis, lanes.FANOUT_BATCH, 2)  # two runs fail, then retried

    post_id = await post(client, token, "to five followers")
    await pipeline.settle()
    assert all([post_id in await timeline_ids(state, fan) for _, fan in fans])
    after = await _visible(client, "default")
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)
    text = await _metrics(client)
    first_took = metric_value(text, f'{FIRST}_sum{{lane="default"}}') - sums[0]
    p95_took = metric_value(text, f'{P95}_sum{{lane="default"}}') - sums[1]
    assert 0 <= first_took <= p95_took < 60

    # Replays: the same batches under new ids, and the whole fan-out again as the
    # reconciler re-runs it. They run and write nothing new; nothing more is observed.
    entries = [[post_id, created_ms(post_id)]]
    for n, (_, fan) in enumerate(fans):
        await pipeline.arq.enqueue_job(
            lanes.FANOUT_BATCH, author_id, entries, [fan], _job_id=f"again:{n}", track=post_id
        )
    rerun = "rf:again"
    await tracking.restart(state.redis, post_id, rerun, ttl=marks.ttl_seconds(state.settings))
    await pipeline.arq.enqueue_job(lanes.FANOUT_POST, post_id, rerun, _job_id=rerun)
    assert await pipeline.run_lane(lanes.DEFAULT) >= len(fans) + 3  # replays, split, batches
    assert await _visible(client, "default") == after
    assert (await marks.finished(state.redis, [tracking.state_key(post_id)])) == [True]


async def test_95_percent_waits_for_a_dead_lettered_batch_and_counts_its_replay_once(
    client: httpx.AsyncClient, state: Any, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state.faults, "job_fault_hook", True)
    monkeypatch.setattr(state.settings, "job_max_tries", 1)  # a failure is a dead letter
    token, _, fans = await author_with_fans(client, 5)  # batches of 4 and 1
    await pipeline.settle()
    before = await _visible(client, "default")
    await faults.fail_next(state.redis, lanes.FANOUT_BATCH, 1)

    post_id = await post(client, token, "one batch lost for now")
    await pipeline.settle()
    holders = sum([post_id in await timeline_ids(state, fan) for _, fan in fans])
    assert holders in (1, 4)  # whichever batch ran first failed: 20% or 80% written
    [letter] = await dead_letters.all_letters(state.redis)
    first, p95 = await _visible(client, "default")
    assert (first - before[0], p95 - before[1]) == (1, 0)

    assert await dead_letters.replay_letter(pipeline.arq, letter)
    await pipeline.settle()
    assert all([post_id in await timeline_ids(state, fan) for _, fan in fans])
    assert await _visible(client, "default") == (first, p95 + 1)

    # The same letter replayed again writes nothing new and observes nothing.
    assert await dead_letters.replay_letter(pipeline.arq, letter)
    await pipeline.settle()
    assert await _visible(client, "default") == (first, p95 + 1)


async def test_a_plan_handed_to_continuations_is_complete_only_with_all_of_them(
    client: httpx.AsyncClient, state: Any, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One batch per planning job: the split plans 4 followers and hands the fifth to a
    continuation; 95% (5 of 5) is reached and observed once, after both reported."""
    monkeypatch.setattr(fanout_constants, "SPLIT_PAGES", 1)
    token, _, fans = await author_with_fans(client, 5)
    await pipeline.settle()
    before = await _visible(client, "default")
    post_id = await post(client, token, "in two plans")
    await pipeline.settle()
    assert all([post_id in await timeline_ids(state, fan) for _, fan in fans])
    after = await _visible(client, "default")
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


async def test_a_big_authors_post_is_counted_in_the_big_lane(
    client: httpx.AsyncClient, state: Any, pipeline: Any
) -> None:
    token, _, fans = await author_with_fans(client, 7)  # BIG_AUTHOR_FOLLOWERS=6 in tests
    await pipeline.settle()
    before = await _visible(client, "big")
    default = await _visible(client, "default")
    post_id = await post(client, token, "to the big lane")
    await pipeline.settle()
    assert all([post_id in await timeline_ids(state, fan) for _, fan in fans])
    after = await _visible(client, "big")
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)
    assert await _visible(client, "default") == default


async def test_a_pull_authors_post_is_visible_at_once_and_its_readers_time_the_pull(
    client: httpx.AsyncClient, state: Any, pipeline: Any
) -> None:
    token, _ = await make_user(client, "star")
    fans = await quick_users(state, [f"fan{i}" for i in range(10)])  # FANOUT_PULL_THRESHOLD
    for fan, _ in fans:
        (await gql(client, "Follow", {"handle": "star"}, token=fan)).ok()
    await pipeline.settle()
    before = await _visible(client, "pull")
    pulls = metric_value(await _metrics(client), "feed_pull_source_seconds_count")

    post_id = await post(client, token, "read, not pushed")
    await pipeline.settle()
    assert not any([post_id in await timeline_ids(state, fan) for _, fan in fans])
    after = await _visible(client, "pull")
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)

    assert post_id in await feed_ids(client, fans[0][0])
    assert metric_value(await _metrics(client), "feed_pull_source_seconds_count") > pulls


async def test_empty_first_pages_are_counted_per_mode(client: httpx.AsyncClient) -> None:
    token, _ = await make_user(client, "loner")  # follows no one, never posted
    samples = {
        mode: f'feed_empty_pages_total{{mode="{mode.lower()}",page="first"}}'
        for mode in ("RANKED", "CHRONOLOGICAL")
    }
    before = {mode: metric_value(await _metrics(client), s) for mode, s in samples.items()}
    hydrated = metric_value(await _metrics(client), 'feed_hydration_batch_posts_bucket{le="0.0"}')
    for mode in samples:
        assert await feed_ids(client, token, mode=mode) == []
    text = await _metrics(client)
    assert {mode: metric_value(text, s) - before[mode] for mode, s in samples.items()} == {
        "RANKED": 1,
        "CHRONOLOGICAL": 1,
    }
    assert metric_value(text, 'feed_hydration_batch_posts_bucket{le="0.0"}') - hydrated == 2


async def test_a_next_page_left_empty_by_a_delete_is_counted(
    client: httpx.AsyncClient, pipeline: Any
) -> None:
    author, _, [(fan, _)] = await author_with_fans(client, 1)
    await pipeline.settle()
    made = [await post(client, author, f"p{i}") for i in range(3)]
    await pipeline.settle()
    sample = 'feed_empty_pages_total{mode="ranked",page="next"}'
    before = metric_value(await _metrics(client), sample)

    page = (await gql(client, "Feed", {"first": 2}, token=fan)).ok()["feed"]
    assert page["pageInfo"]["hasNextPage"]
    shown = {int(e["node"]["id"]) for e in page["edges"]}
    [rest] = set(made) - shown
    (await gql(client, "DeletePost", {"id": str(rest)}, token=author)).ok()
    after = page["pageInfo"]["endCursor"]
    nothing = (await gql(client, "Feed", {"first": 2, "after": after}, token=fan)).ok()["feed"]
    assert nothing["edges"] == []
    assert metric_value(await _metrics(client), sample) - before == 1


async def test_a_page_of_twenty_is_one_hydration_of_twenty(
    client: httpx.AsyncClient, pipeline: Any
) -> None:
    author, _, [(fan, _)] = await author_with_fans(client, 1)
    await pipeline.settle()
    for i in range(25):
        await post(client, author, f"p{i}")
    await pipeline.settle()
    text = await _metrics(client)
    count = metric_value(text, "feed_hydration_batch_posts_count")
    total = metric_value(text, "feed_hydration_batch_posts_sum")
    twenty = metric_value(text, 'feed_hydration_batch_posts_bucket{le="20.0"}')
    ten = metric_value(text, 'feed_hydration_batch_posts_bucket{le="10.0"}')

    assert len(await feed_ids(client, fan, first=20)) == 20
    text = await _metrics(client)
    assert metric_value(text, "feed_hydration_batch_posts_count") - count == 1
    assert metric_value(text, "feed_hydration_batch_posts_sum") - total == 20
    assert metric_value(text, 'feed_hydration_batch_posts_bucket{le="20.0"}') - twenty == 1
    assert metric_value(text, 'feed_hydration_batch_posts_bucket{le="10.0"}') - ten == 0


@pytest.mark.parametrize("mode", ["RANKED", "CHRONOLOGICAL"])
async def test_no_duplicates_over_whole_scrolls(
    client: httpx.AsyncClient,
    state: Any,
    pipeline: Any,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """The read path makes a duplicate impossible (frozen sessions, keyset bounds): the
    counter guards that and stays 0 while pages are served, through a RANKED session's
    window and on below it as a keyset."""
    monkeypatch.setattr(state.settings, "feed_session_size", 10)  # 25 posts outgrow it
    author, _, [(fan, _)] = await author_with_fans(client, 1)
    await pipeline.settle()
    made = [await post(client, author, f"p{i}") for i in range(25)]
    own = [await post(client, fan, f"mine {i}") for i in range(3)]
    await pipeline.settle()
    sample = f'feed_page_duplicates_total{{mode="{mode.lower()}"}}'
    pages = f'feed_request_seconds_count{{mode="{mode.lower()}",page="next"}}'
    text = await _metrics(client)
    duplicates, served = metric_value(text, sample), metric_value(text, pages, 0.0)

    shown = await full_scroll(client, fan, mode=mode, first=4)
    assert sorted(shown) == sorted(made + own)  # each post once
    text = await _metrics(client)
    assert metric_value(text, pages) - served >= 6  # 28 posts, 4 a page
    assert metric_value(text, sample) == duplicates == 0


async def test_a_read_path_that_repeats_posts_is_counted(
    client: httpx.AsyncClient, state: Any, pipeline: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard at work: with the probe's test-only fault FEED_FAULT_REPEAT_POST (keyset
    cursors made inclusive), every next page repeats the post the page before ended at."""
    author, _, [(fan, _)] = await author_with_fans(client, 1)
    await pipeline.settle()
    for i in range(6):
        await post(client, author, f"p{i}")
    await pipeline.settle()
    sample = 'feed_page_duplicates_total{mode="chronological"}'
    before = metric_value(await _metrics(client), sample)
    monkeypatch.setattr(state.faults, "feed_fault_repeat_post", True)

    shown = await full_scroll(client, fan, mode="CHRONOLOGICAL", first=2)
    repeated = len(shown) - len(set(shown))
    assert repeated >= 4
    assert metric_value(await _metrics(client), sample) - before == repeated


async def test_readiness_is_a_gauge_per_part(client: httpx.AsyncClient) -> None:
    text = await _metrics(client)
    assert metric_value(text, 'feed_ready{part="postgres"}') == 1
    assert metric_value(text, 'feed_ready{part="redis"}') == 1
    # No ARQ worker runs between tests: both lanes are not ready.
    assert metric_value(text, 'feed_ready{part="workers:default"}') == 0
    assert metric_value(text, 'feed_ready{part="workers:big"}') == 0

    settings = get_settings().model_copy(
        update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}  # nothing listens there
    )
    broken = create_state(settings)
    try:
        transport = httpx.ASGITransport(app=create_app(broken))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as other:
            assert (await other.get("/readyz")).status_code == 503
            text = await _metrics(other)
        assert metric_value(text, 'feed_ready{part="redis"}') == 0
        assert metric_value(text, 'feed_ready{part="postgres"}') == 1
    finally:
        await broken.close()
    assert metric_value(await _metrics(client), 'feed_ready{part="redis"}') == 1
