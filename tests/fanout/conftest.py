"""The fan-out tests' fixtures."""

from __future__ import annotations

from typing import Any

import pytest

from app.config import get_settings
from app.fanout import constants
from tests.fanout.bursts import BURST_POSTS, WINDOW_SECONDS


@pytest.fixture
def short_window(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The settings this process's app and the pipeline's workers share (get_settings is
    cached), with a short posting-rate window, and reads made cheap enough that pushing more
    than BURST_POSTS posts a window to FANS followers costs more than their pulling (at the
    production constants it takes tens of thousands of followers)."""
    settings = get_settings()
    monkeypatch.setattr(settings, "fanout_control", "cost")
    monkeypatch.setattr(settings, "fanout_pull_min_active_followers", 0)
    monkeypatch.setattr(settings, "fanout_window_seconds", WINDOW_SECONDS)
    per_read = constants.SECONDS_PER_PULLED_SOURCE * (1 + settings.fanout_hysteresis)
    reads = BURST_POSTS * constants.SECONDS_PER_INSERT / per_read
    monkeypatch.setattr(settings, "fanout_reads_per_active_follower", reads)
    return settings
