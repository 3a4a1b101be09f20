"""What the probe exports. Under `make run` (PROMETHEUS_MULTIPROC_DIR set, as for the workers)
these land in the API's /metrics; elsewhere `--metrics-port` serves them.

Every label value is created up front, so a healthy probe shows explicit zeros (an alert on
`feed_probe_leaks_total > 0` then has a series to watch from the first scrape)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

KINDS = ("deleted", "private", "blocked", "unfollowed")
RESULTS = ("ok", "failed")

LEAKS = Counter(
    "feed_probe_leaks_total",
    "Hidden posts a canary's feed page served to a request sent after the change that hides "
    "them was acknowledged (one per page that served one), by the change",
    ["kind"],
)
LOST = Counter(
    "feed_probe_lost_posts_total",
    "Acknowledged canary posts never in the canary follower's feed within the freshness budget",
)
DUPLICATES = Counter(
    "feed_probe_duplicates_total",
    "Posts a canary's scroll (a first page and the next pages it led to) served twice",
)
ROUNDS = Counter(
    "feed_probe_rounds_total",
    "Probe rounds: ok, or failed (a leak, a lost post, a duplicate, or the round could not run)",
    ["result"],
)
POST_VISIBLE = Histogram(
    "feed_probe_post_visible_seconds",
    "From a canary's createPost answer to the first feed page of its follower showing the post",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
LAST_ROUND = Gauge(
    "feed_probe_last_round_timestamp_seconds",
    "Unix time the probe's last round ended (whatever its result)",
    multiprocess_mode="max",
)

for _kind in KINDS:
    LEAKS.labels(_kind)
for _result in RESULTS:
    ROUNDS.labels(_result)
