"""How the read path's queries run: `Reads`, the driver's own SQL ($n parameters) on asyncpg's
connection itself (its statements: app.feed.rows), checked out of the app engine's pool
(same connections, same pool size and overflow, same checkout errors). The read path is a
few lone SELECTs per page, each in its own short checkout, so it needs no ORM session, no
statement compilation and no transaction: in SQLAlchemy's default mode asyncpg wraps every
SELECT in BEGIN ... ROLLBACK, three round trips instead of one. Measured per query (client
CPU): ORM session ~400 us, Core on autocommit ~250 us; SQLAlchemy's Connection, execution
context and result around the driver were still ~40% of a query's client CPU (decision
0052), so the driver connection answers directly (~150-200 us). What the engine did for
these statements is done here: PostgreSQL out of reach is `Unavailable` and throws the
pool's connections of that generation away (app.db.engine's handle_error hook), a read on a
connection the server ended (app.db.errors.ended) is tried once more on a fresh one, a
statement cancelled midway invalidates its connection (its state is unknown), any other
driver error is SQLAlchemy's DBAPIError as before. Listeners of the engine's
`before_cursor_execute` (the tests' query counts) are still told of every statement, with no
connection or cursor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import Pool, PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from app.db.errors import ended, unavailable, unreachable

# Test-only (FEED_FAULT_SKIP_FILTER): each filter statement -> the same without its rule,
# filled in by app.feed.rows, which owns the statements.
UNFILTERED: dict[str, str] = {}


class Reads:
    """The read path's SELECTs: driver SQL on the app engine's pooled connections (see module
    doc).

    At most the pool's size of them at once. The pool lends "overflow" connections past its
    size, but closes them when they come back: under more concurrent readers than that,
    every query paid a fresh connection (TCP + auth + type introspection + preparing its
    statement again), ~10% of the CPU at 50 concurrent clients. Waiting for a pooled
    connection is cheaper, and the overflow stays for the app's other work.
    """

    def __init__(self, engine: AsyncEngine, skip_filter: bool = False) -> None:
        self.engine = engine.execution_options(isolation_level="AUTOCOMMIT")
        self._pool: Pool = engine.sync_engine.pool
        self._dispatch = engine.sync_engine.dispatch  # its listeners, as they are now
        size = getattr(self._pool, "size", None)
        self._slots = asyncio.Semaphore(size()) if callable(size) and size() > 0 else None
        self._faulty: dict[str, str] = UNFILTERED if skip_filter else {}

    async def all(self, statement: str, *args: Any) -> Sequence[Sequence[Any]]:
        statement = self._faulty.get(statement, statement)
        if self._slots is None:
            return await self._all(statement, args)
        async with self._slots:
            return await self._all(statement, args)

    async def _all(self, statement: str, args: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        # The pool's checkout and return may open or close a connection: SQLAlchemy runs
        # those in a greenlet (as engine.connect() does). No transaction is begun, so the
        # return's reset (a rollback) has nothing to do.
        announce = self._dispatch.before_cursor_execute
        if announce:  # listeners (tests count statements): told as the engine tells them
            announce(None, None, statement, args, None, False)
        for attempt in range(2):
            fairy: PoolProxiedConnection = await greenlet_spawn(self._pool.connect)
            try:
                return await fairy.driver_connection.fetch(statement, *args)  # type: ignore[union-attr,no-any-return]
            except Exception as exc:
                if not unreachable(exc):
                    raise sa_exc.DBAPIError(statement, args, exc) from exc
                # As the engine's handle_error: this connection and its generation go.
                self._pool._invalidate(fairy, exc)
                if attempt or not ended(exc):
                    raise unavailable() from exc
                # The server ended this connection (a read loses nothing): once more, on a
                # connection the pool opens now (refused at once if the server is away).
            except BaseException:
                fairy.invalidate()  # cancelled mid-statement: the connection's state is unknown
                raise
            finally:
                await greenlet_spawn(fairy.close)
        raise AssertionError("unreachable")  # the second attempt returns or raises
