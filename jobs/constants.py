"""The workers' numeric knobs, each with its unit and why (arq's constants.py, our own): the
deployment's choices (tries, timeouts, reconciler windows, cron periods) are settings in
`app.config`; these are the code's."""

from __future__ import annotations

# -- ARQ (jobs.worker, jobs.reliability) --------------------------------------------------

# How often an idle worker polls its queue (s): a post's split waits half of it on average
# before it starts; 5 ms is ~200 ZRANGEBYSCOREs a second per idle worker (decision 0064).
POLL_SECONDS = 0.005
# ARQ's limits above ours (jobs.reliability retries and dead-letters first): its job timeout
# is a backstop this much later (s), its tries a margin for killed workers (tries).
ARQ_TIMEOUT_MARGIN_SECONDS = 2
ARQ_EXTRA_TRIES = 3

# -- fan-out tracking and the reconciler (jobs.tracking, jobs.reconcile) ------------------

# The share of a post's planned active followers whose timelines make it "visible" for
# `feed_post_visible_95_seconds` (percent; decision 0023).
VISIBLE_SHARE_PERCENT = 95
# Outbox events the reconciler reads and checks per round trip (events).
RECONCILE_CHUNK = 2000

# -- housekeeping (jobs.housekeeping) -----------------------------------------------------

# Rows deleted per short transaction (rows), at most this many transactions per table and
# pass (batches): a backlog is worked off over several passes, and no pass holds locks or a
# worker for long.
PRUNE_BATCH = 5_000
PRUNE_MAX_BATCHES = 20
# How often the pass runs (minutes; a divisor of 60: the cron's minutes are its multiples).
PRUNE_EVERY_MINUTES = 10
# A stopping worker's cancel repeated this often (s) until its main task ends: Python 3.11's
# wait_for can drop one (jobs.sigterm, decision 0093).
RECANCEL_SECONDS = 0.1
# ... and at each of this many loop turns first (ARQ's close drops the pool a few awaits on).
RECANCEL_TURNS = 50
