"""PostgreSQL out of reach, told apart from everything else, as the typed UNAVAILABLE.

A stopped, restarting or overloaded server shows up as many exception types: a refused or
timed-out connect (OSError), "the database system is shutting down" or "too many clients"
at connect, a pooled connection the server ended (admin shutdown, "connection is closed",
or the driver's protocol left mid-error by the server's goodbye: see `_ended`), a pool
checkout that timed out. None of them is a bug of the request, so none may answer
INTERNAL: the engine (app.db.engine) turns each into `Unavailable` with a retryAfter, at
the two places every statement passes, so reads, writes, token checks and the fast paths
all get the same code (docs/decisions/0019-postgres-outage.md)."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
from sqlalchemy import exc as sa_exc

from app.db.constants import CAUSE_CHAIN_MAX, UNAVAILABLE_RETRY_AFTER_SECONDS
from app.errors import Unavailable

RETRY_AFTER_SECONDS = UNAVAILABLE_RETRY_AFTER_SECONDS
MESSAGE = "The database is unavailable right now; nothing was changed unless said so. Retry."

# SQLSTATEs that mean "this server or connection is going away", besides class 08
# (connection exception): admin shutdown, crash shutdown, cannot connect now (starting up or
# shutting down), idle session timeout, too many connections.
_GONE = frozenset({"57P01", "57P02", "57P03", "57P05", "53300"})
_CHAIN_MAX = CAUSE_CHAIN_MAX


def unreachable(error: BaseException | None) -> bool:
    """Whether `error` (or what caused it) says PostgreSQL cannot be reached right now."""
    return _any_cause(error, _says_unreachable)


def ended(error: BaseException | None) -> bool:
    """Whether `error` says the server ended this one connection (terminated, shut down,
    timed out idle), before or during our statement: a read loses nothing by being tried
    once more on a fresh connection, which fails fast if the server is really away."""
    return _any_cause(error, _ended)


def _any_cause(error: BaseException | None, test: Callable[[BaseException], bool]) -> bool:
    for _ in range(_CHAIN_MAX):
        if error is None:
            return False
        if test(error):
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
    return _ended(error)


# The server's word for "this connection is being ended": admin shutdown (fast shutdown,
# pg_terminate_backend, a failover's fence), idle session timeout; the driver's for a
# connection lost or closed under it.
_ENDED = frozenset({"57P01", "57P05", "08003", "08006"})


def _ended(error: BaseException) -> bool:
    if getattr(error, "sqlstate", None) in _ENDED:
        return True
    # The driver's own word for a connection that is gone (SQLAlchemy's asyncpg dialect
    # tests the same text in is_disconnect).
    if isinstance(error, asyncpg.InterfaceError) and "connection is closed" in str(error):
        return True
    # A server ending an idle connection (fast shutdown, failover, pg_terminate_backend,
    # idle_session_timeout) sends a FATAL ErrorResponse, then closes the socket. asyncpg reads
    # the message before the close, finds no operation waiting for it and leaves its protocol
    # in ERROR_CONSUME; a statement started on it before the close is noticed fails here,
    # before anything is sent ("cannot switch to state 11; another operation (2) is in
    # progress"). The connection is as dead as a closed one (tests/reliability/
    # test_broken_connections.py).
    return isinstance(error, asyncpg.InternalClientError) and (
        "another operation" in str(error) or "unexpected state" in str(error)
    )


def unavailable() -> Unavailable:
    return Unavailable(MESSAGE, retry_after=RETRY_AFTER_SECONDS)
