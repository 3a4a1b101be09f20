"""What the burst tests (test_bursts.py, test_widening.py) share: a mid-size author's
follower count, a short posting-rate window (the fixture `short_window` that sets it is in
conftest.py), the model's burst size, and the checks on a whole scroll."""

from __future__ import annotations

from typing import Any

from app.db.models import FANOUT_PULL, FANOUT_PUSH
from app.fanout import control
from tests.helpers import full_scroll, sql

FANS = 8  # below the pull threshold (10) and above the push threshold (8 - 1): PUSH by count
WINDOW_SECONDS = 4  # the posting-rate window, short so the burst is over soon
BURST_POSTS = 5  # more posts than this within the window tip the model to PULL (FANS followers)


def burst_size(settings: Any) -> int:
    """The fewest posts within the window the model takes for a burst from FANS active
    followers on an idle lane (so the test follows the model's constants)."""
    for posts in range(1, 200):
        inputs = control.AuthorInputs(
            followers=FANS,
            active_followers=FANS,
            posts_per_window=float(posts),
            lane_lag_seconds=0.0,
            queued_jobs=0,
            pin=None,
        )
        if control.decide(FANOUT_PUSH, inputs, settings).mode == FANOUT_PULL:
            return posts
    raise AssertionError("no burst of FANS followers' author goes PULL")


async def assert_every_post_once(client: Any, token: str, expected: set[int]) -> None:
    chrono = await full_scroll(client, token, mode="CHRONOLOGICAL")
    assert chrono == sorted(expected, reverse=True)
    ranked = await full_scroll(client, token, mode="RANKED")
    assert len(ranked) == len(set(ranked)), "a post shown twice"
    assert set(ranked) == expected


async def age_follows(state: Any) -> None:
    """Follows and mode switches an hour old: only timelines or a PULL author's index can
    supply a followee's posts now (not the read path's recent-follow pull)."""
    await sql("UPDATE follows SET created_at = created_at - interval '1 hour'")
    await sql(
        "UPDATE users SET fanout_mode_changed_at = fanout_mode_changed_at - interval '1 hour'"
        " WHERE fanout_mode_changed_at IS NOT NULL"
    )
    state.forget_local()
