"""The engagement log's periodic jobs, run by a real ARQ worker (enqueued by name, the clock
passed as an argument): partitions made ahead and dropped past retention, and each author's
source quality computed from a planted log, then read through the in-process map."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.engagement import partitions
from app.engagement.constants import AHEAD_DAYS, DEFAULT_PRIOR_RATE
from app.engagement.features import smoothed
from app.engagement.kinds import Kind
from app.engagement.pg import driver
from app.fanout import lanes
from jobs.engagement import FEATURES, PARTITIONS
from tests.helpers import eventually, sql


async def _run(pipeline, name: str, now: datetime) -> dict:
    job = await pipeline.arq.enqueue_job(name, now.isoformat(), _queue_name=lanes.DEFAULT)
    assert job is not None
    await pipeline.run_lane(lanes.DEFAULT)
    return await job.result(timeout=5)


async def _partition_days(state) -> set:
    async with driver(state.engine) as conn:
        return set(await partitions.existing(conn))


async def test_the_job_makes_partitions_ahead_and_drops_expired_ones(state, pipeline) -> None:
    retention = state.settings.engagement_retention_days
    today = datetime.now(UTC).date() + timedelta(days=200)  # a clock far ahead: all new
    old = [today - timedelta(days=retention + n) for n in (15, 1, 0)]
    async with driver(state.engine) as conn:
        await partitions.ensure(conn, old)
    for day in old:  # one event in each planted day
        at = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
        state.engagement.append(Kind.CLICK, 1, 2, 3, at=at)
    assert await state.engagement.flush() == 3

    done = await _run(
        pipeline, PARTITIONS, datetime(today.year, today.month, today.day, 1, tzinfo=UTC)
    )
    ahead = [today + timedelta(days=n) for n in range(AHEAD_DAYS + 1)]
    assert done["created"] == [partitions.partition_name(d) for d in ahead]
    # Past retention: the two whose day ended more than `retention` days ago.
    assert set(done["dropped"]) >= {partitions.partition_name(d) for d in old[:2]}
    assert partitions.partition_name(old[2]) not in done["dropped"]
    days = await _partition_days(state)
    assert set(ahead) <= days and old[2] in days and not (set(old[:2]) & days)
    kept = await sql("SELECT at FROM engagement_events")
    assert [r["at"].date() for r in kept] == [old[2]]  # the dropped days' rows went with them

    again = await _run(
        pipeline, PARTITIONS, datetime(today.year, today.month, today.day, 2, tzinfo=UTC)
    )
    assert again == {"created": [], "dropped": []}  # idempotent
    async with driver(state.engine) as conn:  # leave the far days to nobody
        for day in [*ahead, old[2]]:
            await conn.execute(f"DROP TABLE {partitions.partition_name(day)}")


async def test_source_quality_from_a_planted_log(state, pipeline) -> None:
    now = datetime.now(UTC)
    at = now - timedelta(hours=1)
    log = state.engagement
    ann, ben, cat = 101, 102, 103
    # ann: 10 posts served to 10 viewers; 4 of those pairs engaged with (a like, a second
    # like of the same pair, a comment, a click, another like).
    for viewer in range(1, 11):
        log.append(Kind.IMPRESSION, viewer, 1000 + viewer, ann, session_id="s", position=0, at=at)
    for viewer, kind in ((1, Kind.LIKE), (1, Kind.LIKE), (2, Kind.COMMENT), (3, Kind.CLICK),
                         (4, Kind.LIKE)):  # fmt: skip
        log.append(kind, viewer, 1000 + viewer, ann, at=at)
    # ben: 2 served, none engaged; a click on his post by a viewer never served it: nothing.
    log.append(Kind.IMPRESSION, 1, 2001, ben, at=at)
    log.append(Kind.IMPRESSION, 2, 2001, ben, at=at)
    log.append(Kind.CLICK, 9, 2001, ben, at=at)
    log.append(Kind.UNLIKE, 1, 2001, ben, at=at)  # not an engagement
    # Outside the window: nothing.
    log.append(Kind.IMPRESSION, 1, 3001, cat, at=now - timedelta(days=30))
    assert await log.flush()

    done = await _run(pipeline, FEATURES, now)
    prior = 4 / 12
    assert done["authors"] == 2 and abs(done["prior"] - prior) < 1e-9
    rows = {r["author_id"]: r for r in await sql("SELECT * FROM author_quality")}
    assert (rows[ann]["impressions"], rows[ann]["engagements"]) == (10, 4)
    assert (rows[ben]["impressions"], rows[ben]["engagements"]) == (2, 0)
    assert abs(rows[ann]["quality"] - smoothed(4, 10, prior)) < 1e-9
    assert abs(rows[ann]["quality"] - (4 + 20 * prior) / 30) < 1e-9  # the prior's weight: 20
    assert 0 < rows[ben]["quality"] < prior < rows[ann]["quality"] < 0.4

    quality = state.source_quality
    assert quality.of([ann, cat]) == {ann: DEFAULT_PRIOR_RATE, cat: DEFAULT_PRIOR_RATE}
    # That first call found the map never read: it rereads in the background.
    found = await eventually(lambda: quality.of([ann, ben, cat])[ann] != DEFAULT_PRIOR_RATE,
                             what="the map reread")  # fmt: skip
    assert found
    got = quality.of([ann, ben, cat])
    assert got[ann] == rows[ann]["quality"] and got[ben] == rows[ben]["quality"]
    assert got[cat] == quality.prior and abs(quality.prior - prior) < 1e-9  # unknown: prior


async def test_source_quality_keeps_the_most_served_authors_only(state) -> None:
    now = datetime.now(UTC)
    for author, served in ((1, 3), (2, 5), (3, 1)):
        for viewer in range(served):
            state.engagement.append(Kind.IMPRESSION, viewer + 10, author * 100 + viewer, author,
                                    at=now - timedelta(minutes=5))  # fmt: skip
    await state.engagement.flush()
    # The bound (ENGAGEMENT_QUALITY_MAX_AUTHORS) as the job passes it.
    from app.engagement.features import compute_source_quality

    async with driver(state.engine) as conn:
        done = await compute_source_quality(conn, now, 7, 2)
    assert done.authors == 2 and done.prior == 0.0
    kept = {r["author_id"] for r in await sql("SELECT author_id FROM author_quality")}
    assert kept == {0, 1, 2}
