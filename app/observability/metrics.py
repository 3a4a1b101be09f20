"""Prometheus metrics. Names carry units; every process exports its own registry."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

GRAPHQL_REQUESTS = Counter(
    "feed_graphql_requests_total", "GraphQL HTTP requests by outcome", ["outcome"]
)
GRAPHQL_LATENCY = Histogram(
    "feed_graphql_request_seconds",
    "GraphQL HTTP request latency",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
)
OUTBOX_OLDEST_AGE = Gauge(
    "feed_outbox_oldest_unpublished_seconds", "Age of the oldest unpublished outbox event"
)
