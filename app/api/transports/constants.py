"""The transports' fixed numbers, each with its unit and why (decision 0073). What an
operator tunes is a setting (app.config: MAX_REQUEST_BYTES, MAX_IN_FLIGHT,
ADMISSION_WAIT_MS, REQUEST_*_TIMEOUT_SECONDS, MAX_CONNECTIONS_PER_CLIENT, ...); these
follow from the design and the public contract (docs/API.md, "Limits")."""

from __future__ import annotations

# Admission control (app.api.transports.admission).
# Seconds a 503 OVERLOADED tells the client to wait (Retry-After, extensions.retryAfter):
# a slot frees within a request's time, so a second is plenty and cheap to honour.
OVERLOADED_RETRY_AFTER_SECONDS = 1
# Requests that may wait for a slot, per slot (MAX_IN_FLIGHT): enough queue to ride out a
# burst, small enough that a waiter gets a slot within ADMISSION_WAIT_MS.
QUEUE_FACTOR = 4

# Connection guards (app.api.transports.connections).
# Bytes of a request head beyond its query string (MAX_REQUEST_BYTES bounds the latter):
# h11's own default bound for a head.
HEAD_SLACK_BYTES = 16 * 1024
# Seconds a 429 for too many connections tells the client to wait (Retry-After).
CONNECTIONS_RETRY_AFTER_SECONDS = 1

# Document shape limits (app.api.transports.document_limits; docs/API.md, "Limits"): far
# above what the project's own documents use, low enough that no document makes validation
# or planning cost more than a page does.
MAX_TOKENS = 2000  # lexical tokens per document (graphql-core's parser stops there)
MAX_DEFINITIONS = 25  # operations and fragments per document
MAX_FRAGMENT_SPREADS = 50  # `...Name` occurrences per document
MAX_FIELD_REPEATS = 5  # one response key in one selection set (inline fragments included)
MAX_ALIASES = 20  # aliased fields per document, counted at every use of a fragment
