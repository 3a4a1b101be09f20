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
