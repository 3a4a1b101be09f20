"""The engagement log's storage, both candidates of decision 0077 measured per event (issue
35, item 5): what one event costs the API process, PostgreSQL and Redis, from `append` to a
row in `engagement_events`.

- `copy`: the chosen design. `EngagementLog.append` into the in-process buffer, then its
  flush: one asyncpg COPY (`copy_records_to_table`) per FLUSH_AT (2,000) rows into the
  partitioned table;
- `insert`: the same batches as one multi-row INSERT each (`unnest` of column arrays);
- `stream`: Redis Streams: XADD per event (pipelined per batch, as a buffer would send it),
  then a drain job's XREADGROUP of 2,000, decode, COPY, XACK; both sides counted.

CPU is this process's (`time.process_time`), PostgreSQL's backends' (/proc, local server)
and Redis's (`INFO cpu`, the whole server: run it on a quiet one) around the timed part,
divided by the events. A scratch database (migrated) and a scratch Redis db, dropped after.

    python -m benchmarks.engagement_log --events 100000 --redis-db 15
"""

from __future__ import annotations

import argparse
import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg
from redis.asyncio import Redis

from app.engagement.constants import FLUSH_AT
from app.engagement.kinds import COLUMNS, TABLE, Event, Kind
from app.engagement.writer import _copy
from benchmarks.common import Postgres, pg_cpu_delta, scratch

STREAM = "bench:engagement"  # the stream candidate's key, in the scratch db only
GROUP = "drain"


def _events(n: int) -> list[Event]:
    now = datetime.now(UTC)
    return [
        Event(
            now,
            int(Kind.IMPRESSION),
            1 + i % 5000,
            10**18 + i,
            1 + i % 700,
            "s" * 22,
            i % 500,
            "FOLLOWED",
            "v1",
            "a",
        )
        for i in range(n)
    ]


async def _redis_cpu(redis: Redis) -> float:
    info = await redis.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


class Meter:
    """Wall, this process's CPU, PostgreSQL's and Redis's around a block."""

    def __init__(self, pg: Postgres, redis: Redis) -> None:
        self.pg, self.redis = pg, redis

    async def start(self) -> None:
        self.t0, self.c0 = time.perf_counter(), time.process_time()
        self.p0, self.r0 = await self.pg.snapshot(), await _redis_cpu(self.redis)

    async def stop(self) -> dict[str, float]:
        wall, cpu = time.perf_counter() - self.t0, time.process_time() - self.c0
        pg = pg_cpu_delta(self.p0, await self.pg.snapshot())
        return {"wall": wall, "app": cpu, "pg": pg, "redis": await _redis_cpu(self.redis) - self.r0}


async def copy_case(conn: asyncpg.Connection[Any], events: list[Event]) -> None:
    for i in range(0, len(events), FLUSH_AT):
        await _copy(conn, events[i : i + FLUSH_AT])


_INSERT = (
    f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) SELECT * FROM unnest($1::timestamptz[], "
    "$2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::varchar[], $7::int[], "
    "$8::varchar[], $9::varchar[], $10::varchar[], $11::int[], $12::int[], $13::bool[], "
    "$14::real[])"
)


async def insert_case(conn: asyncpg.Connection[Any], events: list[Event]) -> None:
    for i in range(0, len(events), FLUSH_AT):
        batch = events[i : i + FLUSH_AT]
        await conn.execute(_INSERT, *(list(column) for column in zip(*batch, strict=True)))


def _fields(e: Event) -> dict[str, str]:
    return {k: ("" if v is None else v.isoformat() if k == "at" else str(v))
            for k, v in zip(COLUMNS, e, strict=True)}  # fmt: skip


def _decode(fields: dict[bytes, bytes]) -> Event:
    raw = {k.decode(): v.decode() for k, v in fields.items()}
    ints = {"kind", "viewer_id", "post_id", "author_id", "position", "shown", "duplicates"}
    values: list[Any] = []
    for name in COLUMNS:
        text = raw.get(name, "")
        if text == "":
            values.append(None)
        elif name == "at":
            values.append(datetime.fromisoformat(text))
        elif name in ints:
            values.append(int(text))
        elif name == "cost_ms":
            values.append(float(text))
        elif name == "empty":
            values.append(text == "True")
        else:
            values.append(text)
    return Event(*values)


async def stream_append(redis: Redis, events: list[Event]) -> None:
    for i in range(0, len(events), FLUSH_AT):
        pipe = redis.pipeline(transaction=False)
        for e in events[i : i + FLUSH_AT]:
            pipe.xadd(STREAM, _fields(e))  # type: ignore[arg-type]
        await pipe.execute()


async def stream_drain(redis: Redis, conn: asyncpg.Connection[Any]) -> int:
    drained = 0
    while True:
        reply = await redis.xreadgroup(GROUP, "bench", {STREAM: ">"}, count=FLUSH_AT)
        if not reply:
            return drained
        entries = reply[0][1]
        await _copy(conn, [_decode(fields) for _, fields in entries])
        await redis.xack(STREAM, GROUP, *[entry_id for entry_id, _ in entries])
        await redis.xdel(STREAM, *[entry_id for entry_id, _ in entries])
        drained += len(entries)


async def reads(conn: asyncpg.Connection[Any], rows: int) -> None:
    """The log's readers over the whole table: the feature job, the report, the export."""
    import tempfile
    from datetime import timedelta
    from pathlib import Path

    from app.engagement.export import export
    from app.engagement.features import compute_source_quality
    from app.engagement.report import report

    now = datetime.now(UTC) + timedelta(seconds=1)
    since = now - timedelta(days=1)
    t0 = time.perf_counter()
    done = await compute_source_quality(conn, now, 7, 100_000)
    t1 = time.perf_counter()
    await report(conn, since, now)
    t2 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        await export(conn, since, now, Path(tmp) / "log.parquet")
        t3 = time.perf_counter()
        size = (Path(tmp) / "log.parquet").stat().st_size
    for name, seconds in (("features job", t1 - t0), ("report", t2 - t1), ("export", t3 - t2)):
        print(f"{name:<13} {seconds * 1000:>8.0f} ms, {seconds / rows * 1e6:.2f} us per row")
    print(f"features: {done.authors} authors; Parquet {size / rows:.1f} B per row")


def _row(name: str, n: int, figures: dict[str, float]) -> str:
    per = {k: v / n * 1e6 for k, v in figures.items()}
    total = per["app"] + per["pg"] + per["redis"]
    return (f"{name:<22} {per['wall']:>8.2f} {per['app']:>8.2f} {per['pg']:>8.2f} "
            f"{per['redis']:>8.2f} {total:>8.2f}")  # fmt: skip


async def main(events_n: int, redis_db: int) -> None:
    async with scratch("bench_englog", redis_db) as s:
        conn = await asyncpg.connect(s.dsn)
        admin = await asyncpg.connect(s.base_db)
        meter = Meter(Postgres(admin, s.name), s.redis)
        events = _events(events_n)
        print(f"{events_n} events, batches of {FLUSH_AT}; us per event")
        print(f"{'case':<22} {'wall':>8} {'app cpu':>8} {'pg cpu':>8} {'redis':>8} {'total':>8}")
        try:
            await copy_case(conn, events[:FLUSH_AT])  # warm: prepared types, the partition

            from app.engagement.writer import EngagementLog

            log = EngagementLog(None, buffer_max=events_n)  # type: ignore[arg-type]
            await meter.start()
            for e in events:  # the request path's part: one append per event
                log.append(Kind.IMPRESSION, e.viewer_id, e.post_id, e.author_id,
                           session_id=e.session_id, position=e.position, reason=e.reason,
                           model_version=e.model_version, arm=e.arm, at=e.at)  # fmt: skip
            log.clear()
            print(_row("append (one event)", events_n, await meter.stop()))

            page = [(e.post_id, e.author_id, e.position) for e in events[:20]]
            pages = events_n // 21  # 20 IMPRESSION rows and one PAGE row each
            await meter.start()
            for _ in range(pages):  # the feed's hook: a page of 20
                log.page_served(1, page, session_id="s" * 22, duplicates=0, cost_ms=3.0,
                                model_version="v1", arm="a")  # fmt: skip
            log.clear()
            print(_row("page_served (20/page)", pages * 21, await meter.stop()))

            await meter.start()
            await copy_case(conn, events)
            print(_row("copy: COPY batches", events_n, await meter.stop()))

            await meter.start()
            await insert_case(conn, events)
            print(_row("insert: multi-row", events_n, await meter.stop()))

            await s.redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
            await meter.start()
            await stream_append(s.redis, events)
            appended = await meter.stop()
            print(_row("stream: XADD batches", events_n, appended))
            memory = await s.redis.memory_usage(STREAM) or 0
            await meter.start()
            drained = await stream_drain(s.redis, conn)
            drain = await meter.stop()
            assert drained == events_n, drained
            print(_row("stream: drain to PG", events_n, drain))
            both = {k: appended[k] + drain[k] for k in drain}
            print(_row("stream: total", events_n, both))
            print(f"stream memory while undrained: {memory / events_n:.0f} B per event")
            size = await conn.fetchval(f"SELECT pg_total_relation_size('{TABLE}_p' || "
                                       "to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD'))")  # fmt: skip
            rows = await conn.fetchval(f"SELECT count(*) FROM {TABLE}")
            print(f"table: {size / rows:.0f} B per row on disk ({rows} rows)")
            await reads(conn, rows)
        finally:
            await conn.close()
            await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--redis-db", type=int, default=15, help="a scratch db: FLUSHED")
    args = parser.parse_args()
    asyncio.run(main(args.events, args.redis_db))
