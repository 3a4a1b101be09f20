"""Reads that tolerate lag, sent to a PostgreSQL streaming replica while it keeps up
(DATABASE_REPLICA_URL; docs/decisions/0043-postgres-read-replica.md).

Why a router and not a second DSN handed around: every replica read needs the same three
answers - is a replica configured, is it reachable, is it close enough behind the primary -
and the same way back to the primary when one of them is no. `ReplicaRouter.read` runs a read
on the replica when the last check (at most DATABASE_REPLICA_CHECK_SECONDS old) found it
within DATABASE_REPLICA_MAX_LAG_SECONDS, else on the primary; a replica read that fails
(server stopped, connection cut, a recovery conflict) marks the replica down until the next
check and is answered by the primary, so callers never see the replica's trouble.

Lag as the replica itself measures it (no round trip to the primary):
- not in recovery (a promoted replica, or the primary's own URL): 0;
- WAL streaming and all received WAL replayed: 0 (an idle primary has nothing to send);
- else now() - pg_last_xact_replay_timestamp(): replay paused or behind, or the WAL receiver
  not streaming (the primary out of the replica's reach: its data is as old as its last
  replay). Conservative: after a long idle spell the first new write reads as that long a
  lag until it is replayed, which sends reads to the primary for one check.
Staleness served is thus at most MAX_LAG + CHECK seconds. Who must never see stale data
(authorization, the viewer's own writes) does not read here at all: the callers say which
reads come here (app.feed.filter, app.fanout.service)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from prometheus_client import Counter, Gauge
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import make_engine
from app.errors import Unavailable

T = TypeVar("T")

REPLICA_READS = Counter(
    "feed_db_replica_reads_total",
    "Reads meant for the PostgreSQL replica, by use and by where they ran: replica, or "
    "primary because the replica was lagging, down, or failed this read (error)",
    ["use", "served"],
)
REPLICA_LAG = Gauge(
    "feed_db_replica_lag_seconds",
    "The replica's replay lag at this process's last check (-1: not reachable)",
)
REPLICA_STALE_ROWS = Counter(
    "feed_db_replica_stale_rows_total",
    "Rows the replica returned older than the primary's version (or not yet), re-read there",
)

# See the module docstring. One row: (lag seconds or NULL when unknown).
LAG_SQL = """
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0
    WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
         AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming') THEN 0
    ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8
END
"""

# What a replica in trouble raises on the way to us (app.db.engine turns most into Unavailable;
# a recovery conflict, 40001 "canceling statement due to conflict with recovery", stays a
# DBAPIError).
REPLICA_ERRORS: tuple[type[BaseException], ...] = (
    Unavailable,
    sa_exc.DBAPIError,
    sa_exc.TimeoutError,
    OSError,
    TimeoutError,
)

OK, LAG, DOWN = "replica", "lag", "down"


class ReplicaRouter:
    """Where a lag-tolerant read runs now: the replica while it keeps up, else the primary."""

    def __init__(
        self,
        engine: AsyncEngine,
        max_lag_seconds: float,
        check_seconds: float,
        check_timeout_seconds: float = 2.0,
    ) -> None:
        self.engine = engine
        self.max_lag = max_lag_seconds
        self.check_every = check_seconds
        self.check_timeout = check_timeout_seconds
        self.state = DOWN  # until the first check says otherwise
        self.lag: float | None = None
        self._checked = -math.inf
        self._checking: asyncio.Future[None] | None = None
        self._autocommit = engine.execution_options(isolation_level="AUTOCOMMIT")

    async def route(self) -> str:
        """OK, LAG or DOWN, from a check at most `check_every` old (one check at a time)."""
        if time.monotonic() - self._checked >= self.check_every:
            if self._checking is None or self._checking.done():
                self._checking = asyncio.ensure_future(self._check())
            await asyncio.shield(self._checking)
        return self.state

    async def _check(self) -> None:
        try:
            async with asyncio.timeout(self.check_timeout):
                async with self._autocommit.connect() as conn:
                    lag = (await conn.exec_driver_sql(LAG_SQL)).scalar()
        except REPLICA_ERRORS:
            self.lag, self.state = None, DOWN
            REPLICA_LAG.set(-1)
        else:
            self.lag = math.inf if lag is None else max(0.0, float(lag))
            self.state = OK if self.lag <= self.max_lag else LAG
            REPLICA_LAG.set(self.lag if math.isfinite(self.lag) else -1)
        finally:
            self._checked = time.monotonic()

    def failed(self) -> None:
        """A replica read failed: the primary answers until the next check finds it back."""
        self.state, self._checked = DOWN, time.monotonic()

    async def read(
        self,
        use: str,
        on_replica: Callable[[], Awaitable[T]],
        on_primary: Callable[[], Awaitable[T]],
    ) -> T:
        """`on_replica()` if the replica keeps up, else (or when it fails) `on_primary()`."""
        state = await self.route()
        if state == OK:
            try:
                result = await on_replica()
            except REPLICA_ERRORS:
                self.failed()
                REPLICA_READS.labels(use, "error").inc()
                return await on_primary()
            REPLICA_READS.labels(use, OK).inc()
            return result
        REPLICA_READS.labels(use, state).inc()
        return await on_primary()

    async def close(self) -> None:
        if self._checking is not None and not self._checking.done():
            self._checking.cancel()
        await self.engine.dispose()


def make_replica(settings: Settings, pool_size: int = 10) -> ReplicaRouter | None:
    """The router over DATABASE_REPLICA_URL's engine; None when no replica is configured."""
    if not settings.replica_dsn:
        return None
    engine = make_engine(settings, pool_size=pool_size, url=settings.replica_dsn)
    return ReplicaRouter(
        engine,
        settings.database_replica_max_lag_seconds,
        settings.database_replica_check_seconds,
        check_timeout_seconds=min(2.0, settings.database_connect_timeout_seconds),
    )
