"""The timeline store's numeric knobs, each with its unit and why (the deployment's own
bounds are settings: TIMELINE_MAX, AUTHOR_POSTS_MAX in `app.config`)."""

from __future__ import annotations

# The fan-out's first read of a packed timeline (entries, 8 bytes each: 64 bytes): its newest
# entries, up to this many. A post that belongs among them (a late batch, usually one or two
# slots back) is inserted without reading more.
PROBE_ENTRIES = 8
# Keys per script call on a standalone server (keys): a fan-out page of ~1,000 timelines is
# one round trip, while one call blocks Redis ~1.3-2.8 ms (decision 0054).
SCRIPT_BATCH = 1000
# Post ids per REMOVE call (ids, 8 bytes each): a cleanup of a prolific author's posts stays
# a few bounded calls.
REMOVE_IDS_PER_CALL = 1000
# At most this many entries past a timeline's bound before the amortized trim rewrites it
# (entries, `packed.default_trim_slack`): 800 entries take 64 of the 95 that fit in their
# jemalloc size class.
TRIM_SLACK_MAX = 64
