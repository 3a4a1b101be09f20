"""The auth package's fixed numbers, each with its unit and why (decision 0073). What an
operator tunes is a setting (app.config: TOKEN_TTL_SECONDS, RATE_LIMIT_LOGIN_*, ...);
these follow from the design and change with it, not per deployment."""

from __future__ import annotations

# Password guesses (app.auth.guesses, decision 0020).
# Seconds a successful log-in from an address makes it the owner's (its failures then do
# not count against the account): a month covers a device's usual absence.
KNOWN_ADDRESS_SECONDS = 30 * 86_400
# Seconds of the per-account failure window (RATE_LIMIT_LOGIN_FAILURES_PER_HANDLE_PER_HOUR
# counts over it): the setting's name says an hour.
ACCOUNT_WINDOW_SECONDS = 3600
# Entries of the in-process fallback kept while Redis is away (oldest out first): bounds
# the memory a guessing storm can take to a few MB.
LOCAL_MAX_ENTRIES = 100_000

# Argon2 hash budgets (app.auth.hashes): seconds of their window, as the
# RATE_LIMIT_HASHES_*_PER_MINUTE settings name it.
HASH_WINDOW_SECONDS = 60

# Token revocation (app.auth.revocation, decision 0066).
# Every bump writes the cached version at once, so it is never stale while Redis answers; if
# that write fails (Redis down during changePassword), a stale copy lives at most this many
# seconds.
VERSION_CACHE_SECONDS = 300
# Seconds Redis vouches for a token PostgreSQL found not logged out (or that was just
# issued) before asking again: one indexed read per token in use per hour at most.
VOUCH_SECONDS = 3600
# Lapsed revocations (rows) deleted by each logOut: keeps the table bounded in small steps.
PRUNE_BATCH = 100

# Tokens whose signature this process checked (app.auth.tokens), entries: a signature check
# cost ~4% of a feed page's API CPU and its answer for one token never changes; oldest out
# first past this many (a few MB).
VERIFIED_MAX = 20_000
