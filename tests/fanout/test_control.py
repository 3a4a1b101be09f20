"""The fan-out control plane (app.fanout.control, decision 0026): `decide` on its own (pure),
then through the real system: the posting flow's decisions, the pin and `explain` from the
operator's CLI (python -m app.fanout) in a subprocess."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.config import Settings, get_settings
from app.db.models import FANOUT_PULL, FANOUT_PUSH
from app.fanout import lanes
from app.fanout.control import AuthorInputs, decide, read_cost, write_cost
from app.state import create_state
from app.users import reads
from jobs.worker import REVIEW
from tests.helpers import (
    author_with_fans,
    cli,
    eventually,
    fanout_mode,
    feed_ids,
    gql,
    metric_value,
    post,
    sql,
    timeline_ids,
)
from tests.pipeline import Pipeline

# -- decide: pure ----------------------------------------------------------------------------


def _settings(**changes: object) -> Settings:
    base = {
        "fanout_control": "cost",
        "fanout_hysteresis": 0.25,
        "fanout_freshness_budget_seconds": 5.0,
        "fanout_reads_per_active_follower": 2.0,
        "fanout_batch_size": 1000,
        "fanout_pull_min_active_followers": 0,  # the floor has its own test
    }
    return get_settings().model_copy(update={**base, **changes})


def _inputs(**changes: object) -> AuthorInputs:
    base: dict[str, object] = {
        "followers": 40_000,
        "active_followers": 300,
        "posts_per_window": 1.0,
        "lane_lag_seconds": 0.0,
        "queued_jobs": 0,
        "pin": None,
    }
    return AuthorInputs(**{**base, **changes})  # type: ignore[arg-type]


def test_many_followers_few_active_stay_push() -> None:
    decision = decide(FANOUT_PUSH, _inputs(), _settings())
    assert (decision.mode, decision.reason) == (FANOUT_PUSH, "cost_push")
    assert decision.write_cost_seconds is not None and decision.read_cost_seconds is not None
    assert decision.write_cost_seconds < decision.read_cost_seconds
    # A pull author like this one comes back: pulling costs its readers more than pushing.
    assert decide(FANOUT_PULL, _inputs(), _settings()).mode == FANOUT_PUSH


def test_frequent_posting_costs_more_to_push_than_to_pull() -> None:
    decision = decide(FANOUT_PUSH, _inputs(posts_per_window=50), _settings())
    assert (decision.mode, decision.reason) == (FANOUT_PULL, "cost_pull")


def test_hysteresis_in_cost_terms_holds_either_mode() -> None:
    settings = _settings()
    # write = read exactly: inside the band, so neither mode moves.
    posts = settings.fanout_reads_per_active_follower * 39.5 / 11.3
    inputs = _inputs(posts_per_window=posts * 1.1)
    assert write_cost(inputs, settings) > read_cost(inputs, settings)
    assert decide(FANOUT_PUSH, inputs, settings).reason == "hysteresis_hold"
    assert decide(FANOUT_PUSH, inputs, settings).mode == FANOUT_PUSH
    inputs = _inputs(posts_per_window=posts * 0.9)
    assert decide(FANOUT_PULL, inputs, settings).mode == FANOUT_PULL
    assert decide(FANOUT_PULL, inputs, settings).reason == "hysteresis_hold"
    # Past the margin, each switches.
    assert decide(FANOUT_PUSH, _inputs(posts_per_window=posts * 1.3), settings).mode == FANOUT_PULL
    assert decide(FANOUT_PULL, _inputs(posts_per_window=posts * 0.7), settings).mode == FANOUT_PUSH


def test_a_lane_near_its_budget_makes_pushing_costlier() -> None:
    settings = _settings()
    posts = settings.fanout_reads_per_active_follower * 39.5 / 11.3 * 0.5  # write = read / 2
    idle = decide(FANOUT_PUSH, _inputs(posts_per_window=posts), settings)
    lagging = decide(FANOUT_PUSH, _inputs(posts_per_window=posts, lane_lag_seconds=4.0), settings)
    queued = decide(FANOUT_PUSH, _inputs(posts_per_window=posts, queued_jobs=400), settings)
    assert idle.mode == FANOUT_PUSH
    assert (lagging.mode, lagging.reason) == (FANOUT_PULL, "cost_pull")
    assert queued.mode == FANOUT_PULL
    assert lagging.write_cost_seconds == pytest.approx(idle.write_cost_seconds * 5)  # 1/(1-0.8)


def test_a_burst_past_the_freshness_budget_goes_pull_and_comes_back() -> None:
    settings = _settings()
    # 20,000 active followers x 50 posts x 11.3 us = 11.3 s of fan-out in the window.
    burst = _inputs(active_followers=20_000, posts_per_window=50)
    decision = decide(FANOUT_PUSH, burst, settings)
    assert (decision.mode, decision.reason) == (FANOUT_PULL, "burst")
    assert decision.write_cost_seconds is not None and decision.write_cost_seconds > 5.0
    assert decide(FANOUT_PULL, burst, settings).reason == "burst"
    over = decide(FANOUT_PULL, _inputs(active_followers=20_000, posts_per_window=1), settings)
    assert (over.mode, over.reason) == (FANOUT_PUSH, "cost_push")


def test_an_audience_too_big_for_one_post_goes_pull_whatever_the_rate() -> None:
    settings = _settings()
    # 450,000 active followers x 11.3 us = 5.1 s for one post: over the 5 s budget.
    huge = _inputs(followers=500_000, active_followers=450_000, posts_per_window=0)
    decision = decide(FANOUT_PUSH, huge, settings)
    assert (decision.mode, decision.reason) == (FANOUT_PULL, "celebrity")
    assert decide(FANOUT_PULL, huge, settings).reason == "celebrity"  # stays, posting or not
    # Just under: one post fits the budget, and a quiet author is pushed.
    fits = _inputs(followers=500_000, active_followers=400_000, posts_per_window=0)
    assert decide(FANOUT_PULL, fits, settings).mode == FANOUT_PUSH


def test_small_authors_are_never_pulled_by_cost() -> None:
    settings = _settings(fanout_pull_min_active_followers=1_000)
    chatty = _inputs(active_followers=999, posts_per_window=50)  # cost alone says PULL
    assert decide(FANOUT_PUSH, chatty, _settings()).reason == "cost_pull"
    decision = decide(FANOUT_PUSH, chatty, settings)
    assert (decision.mode, decision.reason) == (FANOUT_PUSH, "small_author")
    assert decide(FANOUT_PULL, chatty, settings).mode == FANOUT_PUSH  # a pulled one comes back
    # The burst rule still protects the lane, and a pin still wins.
    flood = _inputs(active_followers=999, posts_per_window=500)  # 5.6 s of fan-out
    assert decide(FANOUT_PUSH, flood, settings).reason == "burst"
    assert decide(FANOUT_PUSH, _inputs(active_followers=10, pin="pull"), settings).mode == (
        FANOUT_PULL
    )


def test_the_measured_read_rate_replaces_the_prior() -> None:
    settings = _settings()  # prior: 2 reads per active follower per window
    inputs = _inputs(active_followers=5_000, posts_per_window=3)  # write 0.17 s, read 0.40 s
    assert decide(FANOUT_PUSH, inputs, settings).mode == FANOUT_PUSH
    rarely = _inputs(active_followers=5_000, posts_per_window=3, reads_per_active_user=0.2)
    decision = decide(FANOUT_PUSH, rarely, settings)
    assert (decision.mode, decision.reason) == (FANOUT_PULL, "cost_pull")
    assert decision.read_cost_seconds == pytest.approx(5_000 * 0.2 * 39.5e-6)


def test_pins_override_everything() -> None:
    settings = _settings()
    burst = _inputs(active_followers=20_000, posts_per_window=50, pin="push")
    assert (
        decide(FANOUT_PULL, burst, settings).mode,
        decide(FANOUT_PULL, burst, settings).reason,
    ) == (
        FANOUT_PUSH,
        "pin",
    )
    quiet = _inputs(pin="pull")
    assert decide(FANOUT_PUSH, quiet, settings).mode == FANOUT_PULL
    assert decide(FANOUT_PUSH, _inputs(pin="pull", active_followers=None), settings).reason == "pin"


@pytest.mark.parametrize("missing", ["active_followers", "posts_per_window"])
def test_missing_inputs_fall_back_to_the_thresholds(missing: str) -> None:
    settings = _settings(fanout_pull_threshold=10_000, fanout_push_threshold=8_000)
    for current, followers, expected in [
        (FANOUT_PUSH, 9_999, FANOUT_PUSH),
        (FANOUT_PUSH, 10_000, FANOUT_PULL),
        (FANOUT_PULL, 8_000, FANOUT_PULL),
        (FANOUT_PULL, 7_999, FANOUT_PUSH),
    ]:
        decision = decide(current, _inputs(followers=followers, **{missing: None}), settings)
        assert (decision.mode, decision.reason) == (expected, "threshold_fallback")
        assert decision.write_cost_seconds is None


def test_decide_is_pure() -> None:
    settings, inputs = _settings(), _inputs(posts_per_window=7)
    assert decide(FANOUT_PUSH, inputs, settings) == decide(FANOUT_PUSH, inputs, settings)


# -- through the real system -----------------------------------------------------------------


@pytest.fixture
def cost_control(monkeypatch: pytest.MonkeyPatch) -> None:
    """FANOUT_CONTROL=cost in this process (API and in-process workers share the settings);
    tests/conftest.py runs the rest of the suite with the thresholds. No small-author floor:
    these authors have a dozen followers."""
    monkeypatch.setattr(get_settings(), "fanout_control", "cost")
    monkeypatch.setattr(get_settings(), "fanout_pull_min_active_followers", 0)


async def _lapse(user_ids: list[int]) -> None:
    await sql(
        "UPDATE users SET last_active_at = now() - interval '90 days' WHERE id = ANY($1::bigint[])",
        user_ids,
    )


async def _cli(*args: str) -> str:
    return await _cli_with({}, *args)


async def _cli_with(extra_env: dict[str, str], *args: str) -> str:
    env = {"FANOUT_CONTROL": "cost", "FANOUT_PULL_MIN_ACTIVE_FOLLOWERS": "0", **extra_env}
    return await cli("app.fanout", *args, env=env)


async def test_many_followers_few_active_stays_push_by_cost(
    client, state, pipeline, cost_control, monkeypatch
) -> None:
    token, _, fans = await author_with_fans(client, 12)  # over FANOUT_PULL_THRESHOLD (10)
    await _lapse([uid for _, uid in fans[2:]])  # 2 of the 12 active
    made = await post(client, token, "few read me")
    await pipeline.settle()
    assert await fanout_mode(client, "author") == "PUSH"
    for _, uid in fans[:2]:
        assert made in await timeline_ids(state, uid)  # pushed to the active ones

    # The same author under the constant thresholds: PULL at 12 followers.
    monkeypatch.setattr(get_settings(), "fanout_control", "threshold")
    await post(client, token, "threshold")
    await pipeline.settle()
    assert await fanout_mode(client, "author") == "PULL"


async def test_a_pin_survives_a_restart_and_shows_in_explain(
    client, state, pipeline, cost_control
) -> None:
    token, _, fans = await author_with_fans(client, 3)
    await post(client, token, "pushed")
    await pipeline.settle()
    assert await fanout_mode(client, "author") == "PUSH"  # by cost: 3 active, 1 post

    said = await _cli("pin", "author", "pull")
    assert "pin auto -> pull" in said
    # A restart: new AppState (engine, Redis clients, caches) and new workers.
    restarted = create_state()
    second = await Pipeline.open(restarted)
    try:
        pulled = await post(client, token, "pulled")
        await second.settle()
    finally:
        await second.close()
        await restarted.close()
    assert await fanout_mode(client, "author") == "PULL"
    for _, uid in fans:
        assert pulled not in await timeline_ids(state, uid)  # one write, no per-follower copy
    explained = await _cli("explain", "author")
    assert "pin:                pull" in explained
    assert "Decision: pull (reason: pin)" in explained

    assert "pin pull -> auto" in await _cli("pin", "author", "auto")
    await post(client, token, "pushed again")
    await pipeline.settle()
    assert await fanout_mode(client, "author") == "PUSH"
    assert (await sql("SELECT fanout_pin FROM users WHERE handle = 'author'"))[0][0] is None


async def test_explain_prints_the_inputs_costs_and_decision(
    client, state, pipeline, cost_control
) -> None:
    token, _, fans = await author_with_fans(client, 12)
    await _lapse([uid for _, uid in fans[3:]])
    for i in range(2):
        await post(client, token, f"post {i}")
    await pipeline.settle()
    out = await _cli("explain", "@author")
    assert "followers:          12" in out
    assert "active followers:   3 " in out
    assert "posts in window:    2 " in out
    assert "lane:               big" in out  # BIG_AUTHOR_FOLLOWERS=6 in tests
    assert "lane queued jobs:   0" in out
    # 3 x 2 x 11.3 us = 0.068 ms to push; 3 x 2 reads x 39.5 us = 0.237 ms to pull.
    assert "write (push):       0.068 ms" in out
    assert "read (pull):        0.237 ms" in out
    assert "Decision: push (reason: cost_push)" in out
    assert "pin:                auto" in out


# -- the measured read rate, the top authors' costs, time over budget ------------------------


async def _counted_reads(state: Any) -> int:
    keys = [k async for k in state.redis.scan_iter(match=reads.minute_key(0)[:-1] + "*")]
    return sum(int(v) for v in await state.redis.mget(keys)) if keys else 0


async def test_feed_reads_measure_the_read_rate_the_model_uses(
    client, state, pipeline, cost_control
) -> None:
    token, _, fans = await author_with_fans(client, 4)
    for i in range(25):  # RANKED pages of 20: a first page and a next one
        await post(client, token, f"post {i}")
    await pipeline.settle()
    for fan, _ in fans:
        await feed_ids(client, fan, first=20, mode="CHRONOLOGICAL")  # gathers: counted
        first = (await gql(client, "Feed", {"first": 20, "mode": "RANKED"}, token=fan)).ok()
        after = first["feed"]["pageInfo"]["endCursor"]
        # The frozen session's next page gathers nothing: not counted.
        await gql(client, "Feed", {"first": 20, "mode": "RANKED", "after": after}, token=fan)

    async def flushed() -> bool:
        return await _counted_reads(state) == 2 * len(fans)

    await eventually(flushed, within=5, what="the read counts flushed to Redis")

    # Counting began two minutes ago: 8 reads in 120 s scale to 40 in the 600 s window, over
    # the 5 active users (author and fans): 8 reads per active user per window.
    since_set = time.time()
    await state.redis.set(reads.SINCE_KEY, int((since_set - 120) * 1000))
    async with state.sessions() as session:
        rate = await reads.reads_per_active_user(session, state.redis, 600, 30, min_reads=8)
        assert await reads.reads_per_active_user(session, state.redis, 600, 30, 9) is None
    assert rate == pytest.approx(8 * (600 / 120) / 5, rel=0.02)

    # The model prices pulling with it: explain says so, and the read cost follows.
    out = await _cli_with({"FANOUT_READ_RATE_MIN_READS": "8"}, "explain", "author")
    observed = 120 + time.time() - since_set  # the CLI's start-up widens the window it sees
    assert "(measured)" in out
    measured = float(out.split("reads per active:")[1].split()[0])
    assert 8.0 * 120 / observed * 0.99 <= measured <= 8.0 * 1.01
    # 4 active followers x ~8 reads x 39.5 us = ~1.26 ms (the window observed grows meanwhile).
    read_ms = float(out.split("read (pull):")[1].split()[0])
    assert read_ms == pytest.approx(4 * measured * 39.5e-3, rel=0.01)
    assert "(the prior" in await _cli("explain", "author")  # 100 reads needed by default


async def test_the_periodic_pass_exports_costs_and_time_over_budget(
    client, state, pipeline, cost_control
) -> None:
    token, _, _fans = await author_with_fans(client, 3)
    await post(client, token, "one")
    await pipeline.settle()
    # The big lane's oldest job has waited 30 s (over the 5 s budget); the default lane none.
    await pipeline.arq.enqueue_job(
        REVIEW,
        _queue_name=lanes.BIG,
        _defer_until=datetime.now(UTC) - timedelta(seconds=30),
    )
    text = (await client.get("/metrics")).text
    over = 'feed_fanout_lane_over_budget_seconds_total{lane="%s"}'
    before = {lane: metric_value(text, over % lane, 0.0) for lane in ("big", "default")}
    job = await pipeline.arq.enqueue_job(REVIEW, None, 5.0, _queue_name=lanes.DEFAULT)
    await pipeline.run_lane(lanes.DEFAULT)
    assert await job.result(timeout=5) == 0

    text = (await client.get("/metrics")).text
    assert metric_value(text, over % "big") == before["big"] + 5.0
    assert metric_value(text, over % "default", 0.0) == before["default"]
    cost = 'feed_fanout_author_cost_seconds{author="author",cost="%s"}'
    # 3 active followers x 1 post x 11.3 us (x the headroom of a lane holding the pass's own
    # job: a few %); 3 x 2 reads (the prior) x 39.5 us.
    assert metric_value(text, cost % "write") == pytest.approx(3 * 11.3e-6, rel=0.05)
    assert metric_value(text, cost % "read") == pytest.approx(3 * 2 * 39.5e-6)
    await pipeline.settle()  # the stale job runs: the lanes are empty again
