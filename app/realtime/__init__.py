"""Live "N new posts" notifications: counts in Redis, pub/sub fan-in, one hub per API process.

No strawberry or starlette here, so workers, the API and the benchmark share it. Two layers
(docs/ARCHITECTURE.md): counts, keys, queries, notifier, settings and metrics are domain code
that workers and graph mutations use; `hub` lives in API processes only and sits above the
domain, next to the composition root. Design and figures: docs/decisions/0004-realtime.md.
"""
