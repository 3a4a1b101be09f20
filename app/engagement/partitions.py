"""One partition of engagement_events per UTC day, `engagement_events_pYYYYMMDD`, holding
[day 00:00, next day 00:00) UTC.

The periodic job (`maintain`, jobs.engagement) makes today's and AHEAD_DAYS more, and drops
every partition whose day ended more than ENGAGEMENT_RETENTION_DAYS ago: retention is a
DROP TABLE of a whole day (no DELETE, no vacuum debt). There is no default partition: a
row whose day has none fails its COPY, and the writer then makes the batch's days and
copies again (`ensure`), so a job that stopped for days loses nothing either.

Making and dropping take a transaction-scoped advisory lock: two processes never race on
the catalogue (a CREATE ... IF NOT EXISTS alone can still collide on its row type)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import asyncpg

from app.engagement.constants import AHEAD_DAYS, PARTITION_LOCK
from app.engagement.kinds import TABLE

_NAME = re.compile(rf"^{TABLE}_p(\d{{8}})$")


def partition_name(day: date) -> str:
    return f"{TABLE}_p{day:%Y%m%d}"


def day_of(name: str) -> date | None:
    """The day a partition's name holds, or None for a table that is not one of ours."""
    match = _NAME.match(name)
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y%m%d").replace(tzinfo=UTC).date()


def _start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


@dataclass
class Maintenance:
    """What one pass did: partitions made and dropped (names, oldest first)."""

    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


async def existing(conn: asyncpg.Connection[Any]) -> dict[date, str]:
    """The log's partitions now, by day."""
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = $1::regclass",
        TABLE,
    )
    found = {}
    for row in rows:
        day = day_of(row["relname"])
        if day is not None:
            found[day] = row["relname"]
    return found


async def ensure(conn: asyncpg.Connection[Any], days: Iterable[date]) -> list[str]:
    """Make the partitions of `days` that are missing; the names made."""
    wanted = sorted(set(days))
    made: list[str] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", PARTITION_LOCK)
        have = await existing(conn)
        for day in wanted:
            if day in have:
                continue
            start = _start(day)
            name = partition_name(day)
            await conn.execute(
                f"CREATE TABLE {name} PARTITION OF {TABLE} FOR VALUES FROM "
                f"('{start.isoformat()}') TO ('{(start + timedelta(days=1)).isoformat()}')"
            )
            made.append(name)
    return made


def expired(day: date, today: date, retention_days: int) -> bool:
    """A partition is dropped once its whole day is more than `retention_days` days past:
    with 30, today's events stay readable for 30 full days after today."""
    return day < today - timedelta(days=retention_days)


async def maintain(
    conn: asyncpg.Connection[Any], today: date, retention_days: int, ahead: int = AHEAD_DAYS
) -> Maintenance:
    """The periodic pass: today's partition and `ahead` more made, expired ones dropped."""
    done = Maintenance()
    done.created = await ensure(conn, (today + timedelta(days=n) for n in range(ahead + 1)))
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", PARTITION_LOCK)
        for day, name in sorted((await existing(conn)).items()):
            if expired(day, today, retention_days):
                await conn.execute(f"DROP TABLE {name}")
                done.dropped.append(name)
    return done
