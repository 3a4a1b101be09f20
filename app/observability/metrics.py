"""Prometheus metrics. Names carry units; every process exports its own registry."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

GRAPHQL_LATENCY = Histogram(
    "feed_graphql_request_seconds",
    "GraphQL HTTP request latency, all operations (log-ins and mutations included)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
)
FEED_LATENCY = Histogram(
    "feed_request_seconds",
    "Time to answer Query.feed (one page), by mode and first/next page",
    ["mode", "page"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
POST_TO_TIMELINE = Histogram(
    "feed_post_to_timeline_seconds",
    "From a post's creation to its id being written into follower timelines",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300),
)
TIMELINE_INSERTS = Counter("feed_timeline_inserts_total", "Timeline entries written by fan-out")
FEED_STAGE = Histogram(
    "feed_read_stage_seconds",
    "Feed read latency per stage",
    ["stage"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)
FEED_CANDIDATES = Counter("feed_candidates_total", "Feed candidates by source", ["source"])
FEED_DEDUPED = Counter("feed_candidates_deduped_total", "Candidates seen from several sources")
FEED_FILTERED = Counter(
    "feed_candidates_filtered_total", "Candidates dropped by the authoritative filter"
)
FEED_CURSOR_EXPIRED = Counter("feed_cursor_expired_total", "Pages asked of an expired session")
FEED_DEGRADED = Counter("feed_degraded_total", "Feed pages served degraded", ["reason"])
FEED_CACHE = Counter("feed_cache_lookups_total", "Read-path cache lookups", ["cache", "result"])
RATE_LIMITED = Counter(
    "feed_rate_limited_total", "Requests refused RATE_LIMITED, by budget", ["budget"]
)
RATE_LIMIT_FALLBACK = Counter(
    "feed_rate_limit_fallback_total",
    "Rate-limit checks counted in process because Redis was unreachable",
)
QUERY_COST_REFUSED = Counter(
    "feed_query_cost_refused_total", "Documents refused for costing over QUERY_COST_LIMIT"
)
PASSWORD_HASH_OVERLOADED = Counter(
    "feed_password_hash_overloaded_total",
    "Password hashes refused OVERLOADED: every Argon2 slot stayed busy past the wait",
)
# Job reliability (jobs/reliability.py, jobs/reconcile.py): counted in the worker processes.
JOB_RETRIES = Counter("feed_job_retries_total", "Failed job runs scheduled again", ["function"])
JOBS_DEAD_LETTERED = Counter(
    "feed_jobs_dead_lettered_total", "Jobs that failed every try: dead letters", ["function"]
)
FANOUT_DECISIONS = Counter(
    "feed_fanout_decisions_total",
    "Fan-out mode decisions (posting flow and periodic pass), by reason (app.fanout.control)",
    ["reason"],
)
FANOUT_MODE_SWITCHES = Counter(
    "feed_fanout_mode_switches_total",
    "Authors switched to push or pull, by the decision's reason",
    ["to", "reason"],
)
_DECISION_REASONS = (
    "pin",
    "threshold",
    "threshold_fallback",
    "cost_push",
    "cost_pull",
    "celebrity",
    "burst",
    "small_author",
    "hysteresis_hold",
)
for _reason in _DECISION_REASONS:  # exported at 0 from the start
    FANOUT_DECISIONS.labels(_reason)
    for _to in ("push", "pull"):
        FANOUT_MODE_SWITCHES.labels(_to, _reason)
FANOUT_LANE_OVER_BUDGET = Counter(
    "feed_fanout_lane_over_budget_seconds_total",
    "Seconds a lane's lag (its oldest waiting job) spent over FANOUT_FRESHNESS_BUDGET_SECONDS, "
    "sampled by the control plane's periodic pass (each sample over counts its interval)",
    ["lane"],
)
FANOUT_RECONCILED = Counter(
    "feed_fanout_reconciled_total",
    "Posts whose fan-out never completed, re-run (rerun) or left to dead letters (gave_up)",
    ["result"],
)

# Service-level figures (docs/decisions/0023-service-level-metrics.md). Lane label values:
# the lanes of app/fanout/lanes.py ("default", "big") and "pull" (a PULL author's post).
_VISIBLE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900)
POST_FIRST_VISIBLE = Histogram(
    "feed_post_first_visible_seconds",
    "From a post's creation to the first of its followers' timelines written (its first "
    "fan-out batch done; pull lane: indexed under its author), once per post, by lane",
    ["lane"],
    buckets=_VISIBLE_BUCKETS,
)
POST_VISIBLE_95 = Histogram(
    "feed_post_visible_95_seconds",
    "From a post's creation to the timelines of 95% of the active followers its fan-out "
    "planned written (counted as batches complete; pull lane: indexed under its author), "
    "once per post, by lane",
    ["lane"],
    buckets=_VISIBLE_BUCKETS,
)
FEED_PAGE_DUPLICATES = Counter(
    "feed_page_duplicates_total",
    "Posts served on a feed page that an earlier page of the same scroll (the pages its "
    "cursor follows) already covered, or twice on one page; an invariant: stays 0",
    ["mode"],
)
FEED_EMPTY_PAGES = Counter(
    "feed_empty_pages_total",
    "Feed pages served with no posts: page=first (nothing to show), page=next (the page "
    "before promised more: hasNextPage was true)",
    ["mode", "page"],
)
FEED_HYDRATION_BATCH = Histogram(
    "feed_hydration_batch_posts",
    "Posts hydrated per feed page (one hydration call per page served, 0 for an empty page)",
    buckets=(0, 1, 2, 5, 10, 20, 50, 100),
)
FEED_PULL_SOURCE = Histogram(
    "feed_pull_source_seconds",
    "Time to gather the newest posts of a viewer's followed PULL authors, per candidate "
    "round that has any (in-process cache, Redis posts:{author}, a PostgreSQL rebuild)",
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 3),
)
READY = Gauge(
    "feed_ready",
    "1 while /readyz finds the part ready (postgres, redis, workers:<lane>), else 0; "
    "refreshed by /readyz and before every /metrics scrape",
    ["part"],
    multiprocess_mode="mostrecent",
)
