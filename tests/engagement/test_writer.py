"""The writer (app/engagement/writer.py) against the real PostgreSQL: a flush writes every
buffered row; the buffer's bound drops and counts what does not fit; a batch PostgreSQL
cannot take is dropped and counted, never raised; a day without its partition gets one; the
process's shutdown flushes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.db.engine import make_engine
from app.engagement import partitions
from app.engagement.kinds import Kind
from app.engagement.pg import driver
from app.engagement.writer import EngagementLog
from tests.engagement.log import logged
from tests.helpers import sql


async def test_a_flush_writes_every_buffered_row(state) -> None:
    log = state.engagement
    for viewer in range(1, 301):
        log.record(Kind.SEEN, viewer, [viewer * 10 + i for i in range(10)])
    log.page_served(7, [(1, 2, 0), (3, 4, 1)], session_id="abc", duplicates=0, cost_ms=1.5)
    assert log.pending == 3003
    before = log.written
    rows = await logged(state)
    assert len(rows) == 3003 and log.written - before == 3003 and log.pending == 0
    assert sorted(r["post_id"] for r in rows if r["kind"] == Kind.SEEN) == sorted(
        v * 10 + i for v in range(1, 301) for i in range(10)
    )


async def test_the_background_flush_writes_without_being_asked(state) -> None:
    from tests.helpers import eventually

    state.engagement.append(Kind.CLICK, 5, 55, 6)

    async def written() -> bool:
        return bool(await sql("SELECT 1 FROM engagement_events WHERE post_id = 55"))

    await eventually(written, within=5, what="the timed flush")


async def test_a_full_buffer_drops_and_counts(state, monkeypatch) -> None:
    log = state.engagement
    monkeypatch.setattr(log, "buffer_max", 5)
    dropped = log.dropped_full
    assert log.record(Kind.SEEN, 1, [1, 2, 3]) == 3
    assert log.append(Kind.LIKE, 1, 4, 9)
    # A page of three and its PAGE row: one fits, three are dropped.
    kept = log.page_served(1, [(5, 9, 0), (6, 9, 1), (7, 9, 2)], session_id=None,
                           duplicates=0, cost_ms=1.0)  # fmt: skip
    assert kept == 1
    assert not log.append(Kind.CLICK, 1, 8)
    assert log.dropped_full - dropped == 4
    assert len(await logged(state)) == 5  # what was kept is written


async def test_a_batch_postgresql_refuses_is_dropped_and_counted(state) -> None:
    away = state.settings.model_copy(
        update={"database_url": "postgresql://postgres@127.0.0.1:1/nowhere"}
    )
    engine = make_engine(away, pool_size=1)
    log = EngagementLog(engine, buffer_max=100)
    try:
        log.record(Kind.SEEN, 1, [1, 2, 3])
        assert await log.flush() == 0  # no exception: best effort
        assert (log.dropped_failed, log.written, log.pending) == (3, 0, 0)
        log.append(Kind.LIKE, 1, 2)
        await log.close()  # a shutdown with PostgreSQL away neither raises nor hangs
        assert log.dropped_failed == 4
    finally:
        await engine.dispose()


async def test_a_day_without_its_partition_gets_one(state) -> None:
    far = datetime.now(UTC) + timedelta(days=40)
    name = partitions.partition_name(far.date())
    async with driver(state.engine) as conn:
        await conn.execute(f"DROP TABLE IF EXISTS {name}")
    state.engagement.append(Kind.CLICK, 1, 2, 3, at=far)
    assert await state.engagement.flush() == 1
    rows = await sql(f"SELECT viewer_id, post_id FROM {name}")
    assert [tuple(r) for r in rows] == [(1, 2)]
    async with driver(state.engine) as conn:
        await conn.execute(f"DROP TABLE {name}")


async def test_closing_the_state_flushes_the_log(state) -> None:
    from app.state import create_state

    other = create_state(pool_size=1)
    other.engagement.append(Kind.COMMENT, 11, 12, 13)
    await other.close()
    rows = await sql("SELECT viewer_id, post_id, author_id FROM engagement_events")
    assert [tuple(r) for r in rows] == [(11, 12, 13)]


async def test_negative_feedback_is_appended_as_the_feedback_mutations_will(state) -> None:
    """HIDE and FEWER name a post (and its author), MUTE an author only: the calls the
    hidePost, muteAuthor and "show fewer" mutations make once committed."""
    log = state.engagement
    assert log.append(Kind.HIDE, 1, post_id=20, author_id=30)
    assert log.append(Kind.MUTE, 1, author_id=31)
    assert log.append(Kind.FEWER, 1, post_id=21, author_id=32, reason="RECOMMENDED")
    rows = await logged(state)
    assert [(Kind(r["kind"]), r["post_id"], r["author_id"], r["reason"]) for r in rows] == [
        (Kind.HIDE, 20, 30, None),
        (Kind.MUTE, None, 31, None),
        (Kind.FEWER, 21, 32, "RECOMMENDED"),
    ]
