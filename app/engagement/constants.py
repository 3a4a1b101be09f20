"""The engagement log's fixed numbers, each with its unit and why (its settings, the ones an
operator tunes, are ENGAGEMENT_* in app.config)."""

from __future__ import annotations

# s: a batch of events collects this long before its one COPY (a stopping process loses at
# most this much, besides what a failed COPY drops).
FLUSH_SECONDS = 1.0
# events: a batch this large is COPYed at once, without waiting for FLUSH_SECONDS (one COPY
# of 2,000 rows costs ~3 ms of PostgreSQL; benchmarks/engagement_log.py).
FLUSH_AT = 2_000
# days: partitions kept ready after today, by the periodic job (a writer that still finds
# none for a row's day makes it, once per batch).
AHEAD_DAYS = 3
# post ids per reportEngagement call (more is BAD_USER_INPUT), as reportImpressions.
MAX_REPORTED = 100
# characters of a client's session id (the feed session ids the API hands out are ~22).
SESSION_ID_MAX = 64
# characters of a reason, a model version, an arm (the table's varchar widths).
REASON_MAX = 32
LABEL_MAX = 64
# impressions: the weight of the prior in an author's smoothed source quality, as if every
# author started with this many impressions at the window's overall rate (a new author is
# neither 0 nor 1; one with 200 impressions is ~90% their own rate).
PRIOR_IMPRESSIONS = 20
# The prior's rate when the window has no impressions at all (a fresh deployment).
DEFAULT_PRIOR_RATE = 0.05
# rows per batch of the Parquet export (a batch is one server-side cursor fetch and one
# row group; memory holds one batch at a time).
EXPORT_BATCH_ROWS = 50_000
# pg_advisory_xact_lock key: one process at a time makes or drops partitions.
PARTITION_LOCK = 770_077
