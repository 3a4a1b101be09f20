"""The fan-out control plane (app.fanout.control, decision 0026): `decide` on its own (pure),
then through the real system: the posting flow's decisions, the pin and `explain` from the
operator's CLI (python -m app.fanout) in a subprocess."""

from __future__ import annotations

import pytest

from app.config import Settings, get_settings
from app.db.models import FANOUT_PULL, FANOUT_PUSH
from app.fanout.control import AuthorInputs, decide, read_cost, write_cost
from app.state import create_state
from tests.helpers import author_with_fans, cli, fanout_mode, post, sql, timeline_ids
from tests.pipeline import Pipeline

# -- decide: pure ----------------------------------------------------------------------------


def _settings(**changes: object) -> Settings:
    base = {
        "fanout_control": "cost",
        "fanout_hysteresis": 0.25,
        "fanout_freshness_budget_seconds": 5.0,
        "fanout_reads_per_active_follower": 2.0,
        "fanout_batch_size": 1000,
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
    tests/conftest.py runs the rest of the suite with the thresholds."""
    monkeypatch.setattr(get_settings(), "fanout_control", "cost")


async def _lapse(user_ids: list[int]) -> None:
    await sql(
        "UPDATE users SET last_active_at = now() - interval '90 days' WHERE id = ANY($1::bigint[])",
        user_ids,
    )


async def _cli(*args: str) -> str:
    return await cli("app.fanout", *args, env={"FANOUT_CONTROL": "cost"})


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
