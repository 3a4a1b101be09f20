"""The realtime package's fixed numbers in one place, each with its unit and why.

Why constants and not settings: none of these is a deployment's choice; each follows from
a measurement (decisions 0039, 0040, 0062) or a protocol, and changing one changes the hub's
behaviour under load in ways its tests and benchmarks pin. What an operator tunes is a
`REALTIME_*` setting (`app/config.py`).

Modules import these by name, so a test may monkeypatch a constant in the module that uses it.
"""

from __future__ import annotations

# -- websocket close codes (RFC 6455) ---------------------------------------------------------

CLOSE_TOO_SLOW = 1013  # "try again later": the socket stopped draining; the client reconnects
CLOSE_GOING_AWAY = 1001  # the server is going away (the hub stops)

# -- the pub/sub connection (app.realtime.pubsub) ---------------------------------------------

# s: how long a SUBSCRIBE waits for Redis's confirmation; past it the subscribe fails, rather
# than a socket told it is live while notifications published meanwhile are missed.
CONFIRM_TIMEOUT = 5.0
# s: first wait before reconnecting a lost pub/sub connection, doubled per failure up to
# RECONNECT_MAX_BACKOFF: a restarting Redis is not hammered, a blip costs 0.1 s.
RECONNECT_BACKOFF = 0.1
RECONNECT_MAX_BACKOFF = 5.0  # s
# s: PING on an idle node connection (cluster only) so a dead node is noticed without traffic.
NODE_HEALTH_CHECK_INTERVAL = 30
NODE_CONNECT_TIMEOUT = 2.0  # s: connecting to one cluster node before trying another

# -- pull-mode delivery (app.realtime.delivery) -----------------------------------------------

# posts: pull-mode notifications waiting for delivery in one process; beyond it they are
# skipped (logged) so a flood cannot grow memory without bound; the next count catches up.
MAX_AUTHOR_BACKLOG = 1000
# users: a pull-mode post's local followers checked and counted in one slice at most; above
# it the followers are cut into growing slices (decision 0062, `delivery_slices`).
DELIVER_SLICE = 1000
SLICE_WEIGHTS = (1, 2, 4, 5)  # the slices' relative sizes: each at most ~2.5x those before it
SLICES_IN_FLIGHT = len(SLICE_WEIGHTS)  # slices checked at once (a pooled session each)

# -- subscribers (app.realtime.hub) -----------------------------------------------------------

# subscribers set up together at most: one SUBSCRIBE, one pipeline per Redis step and one SQL
# query per step cover them all (a reconnect storm paid ~13 ms of CPU per socket before).
ADMIT_BATCH = 500
# s: a dropped socket's close frame is awaited this long at most; a stuck peer is then left
# to the server's websocket keep-alive instead of holding a task forever.
CLOSE_TIMEOUT = 30
# s: on stop, how long the hub waits for its loops and tasks, then for releasing its leases.
STOP_TIMEOUT = 2.0

# -- upkeep (app.realtime.hub's loops) --------------------------------------------------------

# s: one upkeep pass (renewal, follow refresh, resync) waits for broadcasts to end this long
# in all, not per batch: 20,000 sockets' renewal must not wait past its 60 s lease (0062).
UPKEEP_MAX_WAIT = 2.0
UPKEEP_BATCH = 1000  # users per step of the follow refresh and the resync (one query, one call)
# s: the stall sweep runs at most this far apart (more often when REALTIME_STALL_SECONDS / 4
# is shorter), and the heap freezer's tick with it.
SWEEP_PERIOD = 1.0
SWEEPS_PER_STALL = 4  # a stalled socket is dropped within 1.25x REALTIME_STALL_SECONDS
RENEWALS_PER_LEASE = 3  # leases are renewed every third of REALTIME_LEASE_SECONDS

# -- garbage collector policy (app.realtime.heap) ---------------------------------------------

# fraction: the frozen heap is thawed and collected once the subscribers dropped since the
# last thaw reach this share of those frozen (decision 0039): one pause after churn.
HEAP_THAW_FRACTION = 0.25

# -- leases (app.realtime.leases) -------------------------------------------------------------

RENEW_BATCH = 500  # lease keys renewed per script call (one round trip, bounded blocking)
# ms: a lease key outlives its newest member's deadline by this much, so the key's TTL never
# removes a member the zset's own expiry has not.
LEASE_KEY_SLACK_MS = 1000

# -- live counts (app.realtime.counts, app.realtime.batch_counts) -------------------------------

# users: per EVALSHA of the count scripts on a standalone server: one round trip for a batch
# page, while one call blocks Redis for a bounded time (~1 ms).
SCRIPT_KEYS = 500
# s: how stale a worker's guess of the online set may be (`OnlineUsers`): a user who connected
# since costs the batch a second call, never a count.
ONLINE_REFRESH_SECONDS = 1.0
