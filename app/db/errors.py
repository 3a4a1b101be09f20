"""PostgreSQL out of reach, told apart from everything else, as the typed UNAVAILABLE.

A stopped, restarting or overloaded server shows up as many exception types: a refused or
timed-out connect (OSError), "the database system is shutting down" or "too many clients"
at connect, a pooled connection the server ended (admin shutdown, "connection is closed"),
a pool checkout that timed out. None of them is a bug of the request, so none may answer
INTERNAL: the engine (app.db.engine) turns each into `Unavailable` with a retryAfter, at
the two places every statement passes, so reads, writes, token checks and the fast paths
all get the same code (docs/decisions/0019-postgres-outage.md)."""

from __future__ import annotations

import asyncpg
from sqlalchemy import exc as sa_exc

from app.errors import Unavailable

RETRY_AFTER_SECONDS = 2  # extensions.retryAfter: a restart or failover takes about that long
MESSAGE = "The database is unavailable right now; nothing was changed unless said so. Retry."

# SQLSTATEs that mean "this server or connection is going away", besides class 08
# (connection exception): admin shutdown, crash shutdown, cannot connect now (starting up or
# shutting down), idle session timeout, too many connections.
_GONE = frozenset({"57P01", "57P02", "57P03", "57P05", "53300"})
_CHAIN_MAX = 8  # causes followed: the driver's error sits one or two below SQLAlchemy's


def unreachable(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) says PostgreSQL cannot be reached right now."""
    for _ in range(_CHAIN_MAX):
        if error is None:
            return False
        if _says_unreachable(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _says_unreachable(error: BaseException) -> bool:
    if isinstance(error, OSError | sa_exc.TimeoutError):  # connect refused/timed out; pool
        return True
    if isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated:
        return True
    state = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    if isinstance(state, str) and (state.startswith("08") or state in _GONE):
        return True
    # The driver's own word for a connection that is gone (SQLAlchemy's asyncpg dialect
    # tests the same text in is_disconnect).
    return isinstance(error, asyncpg.InterfaceError) and "connection is closed" in str(error)


def unavailable() -> Unavailable:
    return Unavailable(MESSAGE, retry_after=RETRY_AFTER_SECONDS)
