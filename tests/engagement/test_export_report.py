"""`python -m app.ranking export` and `report` on a planted log: the Parquet file reads back
with every row, and the report's figures per model version and arm are the planted ones
(engagements per impression and its Wilson interval, duplicate and empty-page rates, p99)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow.parquet as pq

from app.engagement.export import export
from app.engagement.kinds import Kind
from app.engagement.pg import driver
from app.engagement.report import report, wilson
from tests.helpers import cli, run_module


async def _plant(state, at: datetime) -> None:
    """Arm a (v2): 100 served pairs, 10 engaged; 10 pages of 10, 2 duplicates, cost 1..10
    ms, then one empty page. Arm b (v2): 50 pairs, 20 engaged; 5 pages, no duplicates."""
    log = state.engagement
    for arm, pairs, engaged in (("a", 100, 10), ("b", 50, 20)):
        base = 10_000 if arm == "a" else 20_000
        for n in range(pairs):
            viewer, post = base + n, base + n
            log.append(Kind.IMPRESSION, viewer, post, 7, session_id="s", position=n % 10,
                       reason="FOLLOWED", model_version="v2", arm=arm, at=at)  # fmt: skip
            if n < engaged:
                kind = (Kind.LIKE, Kind.COMMENT, Kind.CLICK)[n % 3]
                log.append(kind, viewer, post, 7, at=at)
    for i in range(10):
        log.page_served(1, [(i, 7, 0)] * 10, session_id="s", duplicates=2 if i == 0 else 0,
                        cost_ms=float(i + 1), model_version="v2", arm="a", at=at)  # fmt: skip
    log.page_served(1, [], session_id="s", duplicates=0, cost_ms=50.0, model_version="v2",
                    arm="a", at=at)  # fmt: skip
    for _ in range(5):
        log.page_served(2, [(1, 7, 0)] * 4, session_id="t", duplicates=0, cost_ms=3.0,
                        model_version="v2", arm="b", at=at)  # fmt: skip
    assert await log.flush()


async def test_the_report_gives_the_planted_figures(state) -> None:
    now = datetime.now(UTC)
    await _plant(state, now - timedelta(minutes=10))
    async with driver(state.engine) as conn:
        arms = {f.arm: f for f in await report(conn, now - timedelta(days=1), now)}
    a, b = arms["a"], arms["b"]
    # IMPRESSION rows: the planted pairs plus the pages' shown posts (page_served logs them).
    assert a.impressions == 100 + 100 and b.impressions == 50 + 20
    # Pairs: the planted ones, plus the pages' (viewer 1: posts 0-9; viewer 2: post 1).
    assert (a.pairs, a.engaged) == (110, 10) and (b.pairs, b.engaged) == (51, 20)
    assert abs(a.engagement_rate - 10 / 110) < 1e-12
    low, high = a.interval
    assert low < 10 / 110 < high
    assert (round(low, 4), round(high, 4)) == tuple(round(x, 4) for x in wilson(10, 110))
    # The textbook case, to pin the formula: 10 of 100 is [0.0552, 0.1744].
    assert tuple(round(x, 4) for x in wilson(10, 100)) == (0.0552, 0.1744)
    assert (a.pages, a.shown, a.duplicates, a.empty_pages) == (11, 100, 2, 1)
    assert a.duplicate_rate == 0.02 and abs(a.empty_rate - 1 / 11) < 1e-12
    # p99 of 1..10 and 50 (interpolated, as percentile_cont): 10 + 0.9 * 40.
    assert abs(a.p99_page_ms - 46.0) < 1e-3
    assert (b.pages, b.duplicate_rate, b.empty_rate, b.p99_page_ms) == (5, 0.0, 0.0, 3.0)


async def test_the_report_command_prints_each_arm(state) -> None:
    now = datetime.now(UTC)
    await _plant(state, now - timedelta(minutes=10))
    out = await cli("app.ranking", "report", "--since", "1d")
    lines = {line.split()[1]: line.split() for line in out.splitlines()[2:]}
    assert set(lines) == {"a", "b"}
    version, _, impressions, rate, low, high, pages, dup, empty, p99 = lines["a"]
    assert (version, impressions, pages, dup, p99) == ("v2", "200", "11", "0.0200", "46.0")
    assert rate == f"{10 / 110:.4f}" and empty == f"{1 / 11:.4f}"
    assert (low, high) == (f"[{wilson(10, 110)[0]:.4f},", f"{wilson(10, 110)[1]:.4f}]")
    code, _, err = await run_module("app.ranking", "report", "--since", "yesterday")
    assert code == 2 and "7d" in err


async def test_export_writes_parquet_that_reads_back(state, tmp_path) -> None:
    now = datetime.now(UTC)
    await _plant(state, now - timedelta(minutes=10))
    state.engagement.append(Kind.LIKE, 3, 4, 5, at=now - timedelta(days=3))  # before --since
    await state.engagement.flush()
    out = tmp_path / "log.parquet"
    printed = await cli("app.ranking", "export", "--since", "1d", "--out", str(out))
    assert printed.startswith("316 events")
    table = pq.read_table(out)
    assert table.num_rows == 100 + 10 + 50 + 20 + (100 + 11) + (20 + 5)  # = 316
    rows = table.to_pylist()
    kinds = {}
    for row in rows:
        kinds[row["kind"]] = kinds.get(row["kind"], 0) + 1
    assert kinds == {"IMPRESSION": 270, "LIKE": 11, "COMMENT": 10, "CLICK": 9, "PAGE": 16}
    assert {r["arm"] for r in rows if r["kind"] == "IMPRESSION"} == {"a", "b"}
    empty = [r for r in rows if r["kind"] == "PAGE" and r["empty"]]
    assert [(r["shown"], r["cost_ms"]) for r in empty] == [(0, 50.0)]
    assert all(r["at"].tzinfo is not None for r in rows)

    # Streamed: small batches, one row group each, the same rows.
    again = tmp_path / "batched.parquet"
    async with driver(state.engine) as conn:
        done = await export(conn, now - timedelta(days=1), now, again, batch_rows=50)
    assert (done.rows, done.batches) == (316, 7)
    assert pq.ParquetFile(again).num_row_groups == 7
    assert pq.read_table(again).to_pylist() == rows
