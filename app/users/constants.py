"""The users package's fixed numbers, each with its unit and why (decision 0073). What an
operator tunes is a setting (app.config: ACTIVE_DAYS, FANOUT_WINDOW_SECONDS, ...)."""

from __future__ import annotations

# Account fields (app.users.service; docs/API.md, "Limits"): part of the contract.
PASSWORD_MIN, PASSWORD_MAX = 8, 128  # characters: a floor against guessing, a ceiling on hashing
DISPLAY_NAME_MAX = 80  # characters: a name, not a bio

# Activity (app.users.activity): a read marks its user active at most once per this many
# seconds (in-process gate, then the Redis one, then SQL), so a user's last_active_at is at
# most ~2 h old while they read: nothing ACTIVE_DAYS (days) can tell apart.
TOUCH_EVERY_SECONDS = 3600
# Users the in-process gate remembers (~5 MB); the oldest go first.
RECENT_MAX = 50_000

# The measured read rate (app.users.reads, decision 0027).
# Seconds between a process's flushes of its read count to Redis: one INCRBY a second at
# most, and the control plane reads minutes.
FLUSH_SECONDS = 1.0
# Seconds a per-minute counter lives: the longest window (FANOUT_WINDOW_SECONDS, at most an
# hour) plus two minutes of slack.
MINUTE_TTL_SECONDS = 3600 + 120
# Seconds the count of users active within ACTIVE_DAYS is cached (one COUNT query a minute).
ACTIVE_TTL_SECONDS = 60
