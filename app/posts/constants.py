"""The posts package's fixed numbers, each with its unit and why (decision 0073). The ids'
layout (app.posts.ids: epoch, sequence bits, digits) is a format, not a knob, and stays there."""

from __future__ import annotations

from datetime import timedelta

# Characters of an idempotency key (createPost, addComment; docs/API.md, "Retries and
# idempotency"): a UUID's 36 with room for a client's own prefix; part of the contract.
IDEMPOTENCY_KEY_MAX = 100
# Seconds a key is kept after its first use: the IDEMPOTENCY_KEY_TTL_SECONDS setting's
# default, for callers that do not pass the setting (the API always does);
# tests/test_settings_bounds.py keeps the two equal.
IDEMPOTENCY_KEY_TTL_SECONDS = 86_400
# Widenings of one post that fan it out again are counted over this rolling window
# (FANOUT_WIDENINGS_PER_POST_PER_HOUR of them, the setting's default below for callers that
# do not pass it; decision 0067): the setting's name says an hour.
WIDENING_WINDOW = timedelta(hours=1)
WIDENINGS_PER_POST_PER_HOUR = 3
