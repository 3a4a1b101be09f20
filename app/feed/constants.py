"""The read path's fixed numbers, each with its unit and why (as arq's constants.py).

These are knobs an operator does not turn: sizes and windows chosen from measurements
(decision notes and docs/benchmarks/archive.md say which), not per deployment. What an operator
may turn is a setting (app.config: FEED_SESSION_SIZE, FEED_SOURCE_TIMEOUT_MS, ...). Kept in
one place so that a reader sees every number the read path runs on; a module reads them
from here, and a test that needs one imports it from here.

Format constants stay with their format (the cursor's tag length in app/feed/cursor.py, the
session's packed id width in app/feed/sessions.py): changing one is a format change, not a
tuning.
"""

from __future__ import annotations

from datetime import timedelta

# -- ids ------------------------------------------------------------------------------------

# post id: the largest signed 64-bit id, "no bound yet" (a first page reads below it).
MAX_ID = 2**63 - 1

# -- candidates -----------------------------------------------------------------------------

# posts: the newest ones taken from each pulled (PULL-mode, or just followed) author. A page
# of 20 rarely shows more than a few of one author's; 50 covers a RANKED session's window.
PULL_PER_AUTHOR = 50

# posts: the viewer's own posts read per candidate round. Own posts are candidates as far as
# the feed is scrolled (read-your-writes, and SPEC: all of them): each round reads the
# viewer's newest ones below its bound, up to its limit or this; when that many come back,
# the round's candidates stop at the oldest of them and the next round reads on below. (625
# own ids per RANKED first page cost a heavy poster ~4 ms more per read: a heap fetch each.)
OWN_PER_READ = 100

# time: follows and mode switches this recent are pulled from PostgreSQL, since their async
# work (backfill into the timeline, the mode switch's fan-out) may still run.
RECENT_WINDOW = timedelta(minutes=10)

# time: under fan-out queue lag, followees' posts this recent are read from PostgreSQL too.
LAG_WINDOW = timedelta(minutes=5)

# candidates per session slot: a RANKED first page filters FEED_SESSION_SIZE x this many
# candidates, since some will be invisible (deleted, blocked, unfollowed).
CANDIDATE_SLACK = 1.25

# candidates per post shown, plus a fixed number: what a keyset round reads for a page of
# `first` (room for some to be filtered out): first x 2 + 10.
KEYSET_CANDIDATES_PER_POST = 2
KEYSET_CANDIDATES_EXTRA = 10

# rounds: candidate rounds a keyset page reads at most, each below the last; past them the
# page is served short (a viewer whose candidates are nearly all hidden).
KEYSET_ROUNDS = 4

# session positions: read past a session page's need at least, as slack for hidden ids (the
# verified read-ahead, one page more, is usually larger).
SESSION_SLACK = 5

# posts: extra newest candidates filtered when the session store failed and a RANKED first
# page is served as a keyset page instead.
SESSION_STORE_FALLBACK_SLACK = 5

# positions: the window FEED_RECOMMENDED_SHARE is counted over (app.feed.sources.cap_share):
# at most ceil(share x this) recommendations in any this many consecutive positions, so a
# page of 20 shows at most 2 x that wherever it starts.
SHARE_WINDOW = 10

# -- affinity (RANKED first pages' context query, app/feed/rows.py) -----------------------------

# likes, comments: the viewer's newest ones that make per-author affinity. Enough to weigh
# the authors a viewer engages with now; a bounded index range each.
AFFINITY_LIKES = 500
AFFINITY_COMMENTS = 200

# -- source reads within FEED_SOURCE_TIMEOUT_MS (app/feed/deadline.py) -------------------------

# reads: PostgreSQL fallbacks for late Redis reads running at once, per process. Past it a
# late read waits on instead of adding another expensive query to a process already behind.
MAX_FALLBACKS = 4

# timeouts: how many more source timeouts a late read may wait, past MAX_FALLBACKS or with a
# busy event loop, before it degrades (measured: without it ~10% of reads went degraded at
# 50 concurrent clients on 2 cores).
PATIENCE = 8

# share of the source timeout: event-loop lag (timers running late) this large means the
# process, not Redis, is the likelier reason a read is late.
BUSY_SHARE = 0.2

# s: how often the loop-lag watch arms a timer while reads come, and the window its worst
# lateness is kept over (the figure covers the last one to two windows).
LOOP_LAG_PERIOD_SECONDS = 0.02
LOOP_LAG_WINDOW_SECONDS = 1.0

# -- in-process caches (each beside what it caches) ------------------------------------------

# s: how long a pulled author's newest ids are served from the process's cache. A celebrity
# is read by every follower's feed: one Redis read per process per this, and a new post is
# seen within it (benchmarks/report/drive.py waits this plus a margin).
AUTHOR_CACHE_SECONDS = 2.0

# keys: entries a coalescing cache holds at most; past it, it is emptied (entries live
# seconds anyway).
HOT_CACHE_MAX = 50_000

# viewers: whose last first-page candidate merge a process remembers (oldest go first). A
# heavy viewer's entry holds ~30 KB (the timeline's 800 ids, ~2,600 merged ids): ~30 MB.
MERGES_MAX = 1_000

# viewers: whose open RANKED session a process remembers (~5 MB); oldest go first.
OPEN_SESSIONS_MAX = 20_000

# viewers: whose first-page context a process caches (oldest dropped first).
CONTEXT_CACHE_MAX = 10_000

# s: how stale the process's view of the pull-mode users may be (a switch is seen within it,
# well inside the SPEC's 5 s freshness budget).
EPOCH_SECONDS = 1.0

# rows: verified-window rows held at most for a PostgreSQL outage (~50 MB); the oldest
# windows go first past it.
VERIFIED_ROWS_MAX = 100_000

# -- impressions (app/feed/impressions.py) --------------------------------------------------

# s: a batch of impressions collects this long before its one round trip.
IMPRESSIONS_FLUSH_SECONDS = 0.25

# ids: buffered in a process at most; past it the batch is flushed at once.
IMPRESSIONS_MAX_PENDING = 5_000

# ids: of one viewer per batch (the newest win).
IMPRESSIONS_MAX_PER_VIEWER_BATCH = 1_000

# post ids: per reportImpressions call (more is BAD_USER_INPUT; docs/API.md).
MAX_REPORTED = 100

# -- replicas (app/feed/filter.py) -----------------------------------------------------------

# ms: a candidate a replica's filter answer left out is asked of the primary when its id's
# time is later than the replica's last replayed commit less this (decision 0086): the id's
# time is the API host's clock, the commit time the primary's; covers their skew and a
# post's own transaction (ms). Larger only sends a few more lacking ids' pages to the primary.
REPLAY_CLOCK_MARGIN_MS = 2_000
