"""The fixed numbers of app's top-level modules, each with its unit and why (decision 0073).
What an operator tunes is a setting (app.config); app.config's own numbers (the secret's
floor, the canary prefix, the settings' bounds) stay beside the settings they bound."""

from __future__ import annotations

# Client addresses (app.client_address).
# Bits of an IPv6 address that name one client: one host's usual allocation (RFC 4291,
# SLAAC); the CLIENT_IPV6_PREFIX setting's default (tests/test_settings_bounds.py).
DEFAULT_IPV6_PREFIX = 64
CACHE_ENTRIES = 16_384  # addresses whose budget key is cached per process (an lru_cache)

# Rate limits (app.ratelimit): counters of the in-process fallback kept while Redis is
# away (~10 MB at worst), oldest out first.
LOCAL_MAX_BUCKETS = 100_000

# Text rules (app.text_rules): combining marks allowed in a row. Stacked marks a script
# needs stay well below this (Vietnamese, Thai, Hebrew with points and cantillation: 2-4
# after NFC); Zalgo text piles tens on one letter.
COMBINING_RUN_MAX = 4

# The synthetic probe's User-Agent (app.probe sends it, over HTTP and on its websockets'
# upgrade): the service's logs count its requests as routine (app.observability.quiet_logs).
PROBE_USER_AGENT = "hybridfeed-probe"
