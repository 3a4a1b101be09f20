"""The synthetic probe's fixed numbers, each with its unit and why (decision 0073). What an
operator tunes is a PROBE_* setting (app.probe.settings) or an option of `python -m
app.probe`."""

from __future__ import annotations

# The program (app.probe.__main__).
READY_WAIT_SECONDS = 60.0  # --once/--rounds: how long the service may take to be ready
HEARTBEAT_ROUNDS = 40  # continuous runs log every this many ok rounds (failed ones always)

# Its client (app.probe.client).
ATTEMPTS = 3  # tries of a request refused as retryable (OVERLOADED, UNAVAILABLE, dropped)
RETRY_CAP_SECONDS = 2.0  # the longest wait between them, whatever retryAfter says

# Its ledger (app.probe.ledger).
# Seconds a degraded page may lag a hidden post's change: FEED_AUTHZ_TTL_SECONDS's default
# (the probe reads no service settings; tests/test_settings_bounds.py keeps them equal).
DEGRADED_GRACE_SECONDS = 5.0
KEEP_POSTS = 2000  # posts remembered (a few rounds' worth: 4 canaries make ~8 a round)

# A round (app.probe.round).
POLL_SECONDS = 0.25  # between visibility reads when no frame announces anything
VISIBLE_FIRST = 10  # a visibility read's page: this round's posts are at its top
MAX_PAGES = 5  # pages per scroll
WARM_SECONDS = 3.0  # a degraded first page is read again this long before the round goes on
