"""The fan-out's numeric knobs, each with its unit and why (a deployment's own choices are
settings, `FANOUT_*` in `app.config`; these are the code's, measured or argued here). Read as
`constants.NAME` where used, so a test may change one (monkeypatch) for a small world."""

from __future__ import annotations

from datetime import timedelta

# -- the split (app.fanout.split) ---------------------------------------------------------

# Pages (FANOUT_BATCH_SIZE followers each) one planning job reads before handing over to a
# continuation job: a worker killed mid-split loses little, and its retry repeats nothing.
SPLIT_PAGES = 50
# Pages per FanoutBatch job after a split's first page (queued alone, to start at once): 50
# pages are 8 jobs (1 + 7 x 7), each running its pages as script calls (decision 0054).
JOB_PAGES = 7
# Jobs a split queues at once (jobs; each is a few round trips to ARQ's Redis).
ENQUEUE_CONCURRENCY = 16
# The first read of a planning job that writes pages itself (followers, a fifth of a page):
# Redis has its first call a few ms after the split starts (decision 0064).
KEPT_FIRST_READ = 200
# Groups a planning job writes at once (groups, each DELIVER_IN_FLIGHT calls): 3 x 2 calls of
# 1,000 keys are ~10 ms of Redis work queued, enough to cover a busy worker's pauses, while a
# post of many groups neither opens a connection per call nor queues all its calls in front
# of other posts' batches (decision 0064).
KEPT_GROUPS_IN_FLIGHT = 3
# How far before a push->pull switch posts may still have been split in pull mode (queue
# lag): a switch back to PUSH re-pushes them (re-pushing one already pushed changes nothing).
PULL_SWITCH_MARGIN = timedelta(hours=1)

# -- the batch write (app.fanout.write) ---------------------------------------------------

# Script calls of one FanoutBatch job in flight at once (calls): one worker builds a page's
# call in ~1 ms of CPU while Redis takes ~1.3-2.8 ms to run it (decision 0054).
DELIVER_IN_FLIGHT = 2

# -- the graph jobs (app.fanout.graph_jobs) -----------------------------------------------

# A post committed while a rebuild was reading may be skipped by both the fan-out (no timeline
# yet) and the rebuild's snapshot: re-reading this window after the write closes it.
REBUILD_CATCH_UP = timedelta(seconds=30)
# Followers read per query when a deleted or hidden post leaves their live counts (followers):
# 100,000 followers in 0.4-1.0 s on a loaded 2-core machine, 1,000,000 in 9.6-9.9 s (pages of
# 1,000: 1.8 s and 21 s).
WITHDRAW_PAGE = 5000

# -- the control plane (app.fanout.control, docs/decisions/0026) --------------------------

# Seconds of fan-out wall time per timeline insert (s): a post to 50,000 empty packed
# timelines took 564 ms from commit to the last timeline written with 2 ARQ workers
# (docs/benchmarks/archive.md, "Timeline layouts: packed vs zset", "The committed run"), of which
# 2.77 µs is Redis server time. Wall time, because the freshness budget is wall time.
SECONDS_PER_INSERT = 11.3e-6
# Seconds per pulled source and read (s): same run, store level, "pull authors (50 x 50)",
# packed: 1,976 µs wall per call (client included) for 50 pulled sources.
SECONDS_PER_PULLED_SOURCE = 39.5e-6
# Lane pressure (lag or queued work against the budget) multiplies the write cost up to this
# (factor): at 90% of the budget pushing costs 10x, past it pushing a big author is out of
# the question.
MAX_HEADROOM_FACTOR = 10.0
# How long an author's counted active followers are cached (s): a follower more or less in a
# minute does not change a decision.
ACTIVE_COUNT_TTL_SECONDS = 60
# The posting window is kept at most this long (s) and this many posts per author (posts): a
# bound, not a limit on posting; past it the rate reads as "at least this many".
WINDOW_MAX_SECONDS = 3600
WINDOW_MAX_POSTS = 10_000
# Published costs outlive the pass that wrote them (s, at least; else 3 review intervals), so
# a scrape between two passes sees them and they go when passes stop.
COSTS_MIN_TTL_SECONDS = 60
