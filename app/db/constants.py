"""The db package's fixed numbers, each with its unit and why (decision 0073). What an
operator tunes is a setting (app.config: DATABASE_CONNECT_TIMEOUT_SECONDS,
DATABASE_REPLICA_*). The FanoutMode values in app.db.models are stored codes, not knobs."""

from __future__ import annotations

# Seconds an UNAVAILABLE (PostgreSQL out of reach) tells the client to wait
# (extensions.retryAfter): a restart or failover takes about that long.
UNAVAILABLE_RETRY_AFTER_SECONDS = 2
# Causes followed down an exception chain looking for the driver's error: it sits one or
# two below SQLAlchemy's; eight ends any cycle early.
CAUSE_CHAIN_MAX = 8
