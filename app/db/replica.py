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
Staleness served is thus at most MAX_LAG + CHECK seconds. Reads that must never be stale
(authorization, the viewer's own writes) come here only behind the narrowing watermarks
(app.db.watermarks; app.feed.filter compares them with the replayed LSN each check also
reads: decision 0086); the callers say which reads come here (app.feed.filter,
app.feed.context_cache, app.fanout.service). Several replicas (DATABASE_REPLICA_URLS): one
router each, `ReplicaSet` picks the least loaded that keeps up."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from prometheus_client import Counter, Gauge
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db.engine import make_engine
from app.errors import Unavailable

T = TypeVar("T")

REPLICA_READS = Counter(
    "feed_db_replica_reads_total",
    "Reads meant for a PostgreSQL replica, by use, by where they ran (replica; or the "
    "primary because the replicas were lagging, down, failed this read (error), had not "
    "replayed the data or a watermark concerning it (behind), or the watermarks were "
    "unknown (marks_unknown)) and by replica (its index in DATABASE_REPLICA_URLS; '' when "
    "none was tried)",
    ["use", "served", "replica"],
)
REPLICA_LAG = Gauge(
    "feed_db_replica_lag_seconds",
    "The replica's replay lag at this process's last check (-1: not reachable)",
)

# See the module docstring. One row: (lag seconds or NULL when unknown, replayed LSN as a
# byte position: what this server's snapshots taken from now on contain at least; a server
# not in recovery contains its own WAL; the primary's commit time of the last transaction
# replayed, in epoch ms, NULL when none was since start-up; a server not in recovery holds
# every commit: the largest bigint).
LAG_SQL = """
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0
    WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
         AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming') THEN 0
    ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8
END, (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
           ELSE pg_current_wal_lsn() END - '0/0'::pg_lsn)::bigint,
CASE WHEN pg_is_in_recovery()
     THEN floor(EXTRACT(EPOCH FROM pg_last_xact_replay_timestamp()) * 1000)::bigint
     ELSE 9223372036854775807 END
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
ERROR, BEHIND, MARKS_UNKNOWN = "error", "behind", "marks_unknown"


class ReplicaRouter:
    """Where a lag-tolerant read runs now: the replica while it keeps up, else the primary."""

    def __init__(
        self,
        engine: AsyncEngine,
        max_lag_seconds: float,
        check_seconds: float,
        check_timeout_seconds: float = 2.0,
        name: str = "0",
    ) -> None:
        self.engine = engine
        self.name = name  # the metrics' `replica` label: its index in DATABASE_REPLICA_URLS
        # The replayed LSN at the last check, and `connects` as it was then: valid for a read
        # only while no connection to the server was opened since (one opened later may be to
        # a restarted server, whose snapshots may start below it: decision 0086).
        self.replay_lsn: int | None = None
        # The primary's commit time (epoch ms) of the last transaction replayed at that check
        # (0: none since the replica started), valid as `replay_lsn` is: a row the replica
        # lacks that was written after it may just not be replayed (app.feed.filter).
        self.replayed_ms = 0
        self.connects = 0
        self._lsn_connects = -1
        self.inflight = 0  # reads running on it now (ReplicaSet's load)
        event.listen(engine.sync_engine, "connect", self._connected)
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

    def _connected(self, *_: object) -> None:
        self.connects += 1

    def known_lsn(self) -> tuple[int | None, int]:
        """(replayed LSN known now, the connection count it holds for): snapshots taken from
        now on contain at least that LSN while `connects` stays the same. None: unknown."""
        if self._lsn_connects != self.connects:
            return None, self.connects
        return self.replay_lsn, self.connects

    async def _check(self) -> None:
        try:
            async with asyncio.timeout(self.check_timeout):
                async with self._autocommit.connect() as conn:
                    connects = self.connects  # after this check's own connect, if any
                    row: Any = (await conn.exec_driver_sql(LAG_SQL)).one()
                    lag, lsn, replayed_ms = row[0], row[1], row[2]
        except REPLICA_ERRORS:
            self.lag, self.state = None, DOWN
            self.replay_lsn = None
            REPLICA_LAG.set(-1)
        else:
            self.replay_lsn = None if lsn is None else int(lsn)
            self.replayed_ms = 0 if replayed_ms is None else int(replayed_ms)
            self._lsn_connects = connects
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
                REPLICA_READS.labels(use, ERROR, self.name).inc()
                return await on_primary()
            REPLICA_READS.labels(use, OK, self.name).inc()
            return result
        REPLICA_READS.labels(use, state, self.name).inc()
        return await on_primary()

    async def close(self) -> None:
        if self._checking is not None and not self._checking.done():
            self._checking.cancel()
        await self.engine.dispose()


class ReplicaSet:
    """Every configured replica, each with its own router (lag check, LSN): a read goes to
    the one that keeps up with the fewest reads running on it (ties at random)."""

    def __init__(self, routers: list[ReplicaRouter]) -> None:
        self.routers = routers

    async def pick(self) -> tuple[ReplicaRouter | None, str]:
        """The least loaded replica that keeps up, or (None, why not: LAG or DOWN)."""
        routers = self.routers
        if len(routers) == 1:
            states = [await routers[0].route()]
        else:
            states = list(await asyncio.gather(*(r.route() for r in routers)))
        ready = [r for r, state in zip(routers, states, strict=True) if state == OK]
        if not ready:
            return None, LAG if LAG in states else DOWN
        if len(ready) == 1:
            return ready[0], OK
        # Random among the least loaded: a page's reads (context, candidates, filter, rows)
        # come in a fixed order, which a strict rotation would pin to fixed replicas.
        least = min(r.inflight for r in ready)
        return random.choice([r for r in ready if r.inflight == least]), OK

    async def close(self) -> None:
        for router in self.routers:
            await router.close()


def make_replicas(settings: Settings, pool_size: int = 10) -> ReplicaSet | None:
    """A router over each of DATABASE_REPLICA_URLS' engines (named by index); None when no
    replica is configured."""
    dsns = settings.replica_dsns
    if not dsns:
        return None
    return ReplicaSet(
        [
            ReplicaRouter(
                make_engine(settings, pool_size=pool_size, url=dsn),
                settings.database_replica_max_lag_seconds,
                settings.database_replica_check_seconds,
                check_timeout_seconds=min(2.0, settings.database_connect_timeout_seconds),
                name=str(i),
            )
            for i, dsn in enumerate(dsns)
        ]
    )
