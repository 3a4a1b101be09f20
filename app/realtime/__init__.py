"""Live "N new posts" notifications: counts in Redis, pub/sub fan-in, one hub per API process.

Domain code only: no strawberry or starlette here, so workers, the API and the benchmark share it.
Design and figures: docs/decisions/0004-realtime.md.
"""
