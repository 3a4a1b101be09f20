"""Pull-only is configurable (decision 0037): FANOUT_PULL_THRESHOLD=1, FANOUT_PUSH_THRESHOLD=0."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings
from app.db.models import FANOUT_PULL, FANOUT_PUSH
from app.fanout.control import threshold_mode


def test_pull_only_pulls_every_author_with_a_follower_and_never_switches_back() -> None:
    settings = Settings(fanout_pull_threshold=1, fanout_push_threshold=0)
    assert threshold_mode(FANOUT_PUSH, 1, settings) == FANOUT_PULL
    assert threshold_mode(FANOUT_PUSH, 0, settings) == FANOUT_PUSH  # nobody to push to
    assert threshold_mode(FANOUT_PULL, 0, settings) == FANOUT_PULL  # lost every follower


@pytest.mark.parametrize(("pull", "push"), [(1, -1), (10, 10), (10, 12)])
def test_push_threshold_must_stay_below_the_pull_threshold(pull: int, push: int) -> None:
    with pytest.raises(ValidationError, match="FANOUT_PUSH_THRESHOLD"):
        Settings(fanout_pull_threshold=pull, fanout_push_threshold=push)
