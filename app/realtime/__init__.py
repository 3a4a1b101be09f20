"""Live "N new posts" notifications: counts in Redis, pub/sub fan-in, one hub per API process.

No strawberry or starlette here, so workers, the API and the benchmark share it. Two layers
(docs/ARCHITECTURE.md): counts, keys, queries, notifier, leases and metrics are domain code
that workers and graph mutations use; `hub` lives in API processes only and sits above the
domain, next to the composition root. The hub's parts, one concept each, sit in the domain
layer because they need nothing above it: `subscriber` (a socket's one-slot queue),
`pubsub` (the one pub/sub connection), `delivery` (the SQL-backed counting before a frame),
`follows` (pull-mode authors followed by local users),
`heap` (the collector policy) and `constants` (the package's fixed numbers, with units).
Design and figures: docs/decisions/0004-realtime.md, the split: 0072.
"""
