"""The live counts' numeric knobs (`app.realtime.counts`, `app.realtime.batch_counts`), each
with its unit and why; the tunable ones a deployment sets are settings (`REALTIME_*`,
`app.config`), these are the code's own."""

from __future__ import annotations

# Users per EVALSHA of the count scripts on a standalone server (users): one round trip for
# a batch page, while one call blocks Redis for a bounded time (~1 ms).
SCRIPT_KEYS = 500
# How stale a worker's guess of the online set may be (seconds, `OnlineUsers`): a user who
# connected since costs the batch a second call, never a count.
ONLINE_REFRESH_SECONDS = 1.0
