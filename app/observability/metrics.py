"""Prometheus metrics. Names carry units; every process exports its own registry."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

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
FANOUT_RECONCILED = Counter(
    "feed_fanout_reconciled_total",
    "Posts whose fan-out never completed, re-run (rerun) or left to dead letters (gave_up)",
    ["result"],
)
