"""The four scenarios of the report, each on the same graph and the same post stream."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import numpy as np

from benchmarks.common import job_results, percentile, variant_document
from benchmarks.report import check, drive
from benchmarks.report.drive import Posted
from benchmarks.report.generate import Layout
from benchmarks.report.scales import Scale
from benchmarks.report.system import Client, System


@dataclass
class World:
    """What the scenarios share: the graph's facts and the same streams for every strategy."""

    scale: Scale
    layout: Layout
    active: np.ndarray
    inactive: np.ndarray
    authors: list[int]  # ordinary active authors with followers, in stream order
    viewers: list[int]  # active users following someone: the read sample
    schedule: list[tuple[float, int, bool]]
    burst: list[tuple[float, int, bool]]
    follower_counts: dict[int, int]


async def world(system: System, scale: Scale) -> World:
    layout = Layout.of(scale)
    rng = np.random.default_rng(scale.seed + 1)
    active = await drive.active_ids(system.dsn)
    conn = await asyncpg.connect(system.dsn)
    try:
        everyone = np.arange(1, scale.users + 1, dtype=np.int64)
        inactive = np.setdiff1d(everyone, active)
        rows = await conn.fetch(
            f"SELECT id FROM users WHERE follower_count > 0 AND id >= $1 AND {drive.ACTIVE_SQL}",
            layout.first_ordinary,
        )
        authors_all = np.array([r[0] for r in rows], dtype=np.int64)
        rows = await conn.fetch(
            f"SELECT id FROM users WHERE following_count > 0 AND id >= $1 AND {drive.ACTIVE_SQL}",
            layout.first_ordinary,
        )
        readers = np.array([r[0] for r in rows], dtype=np.int64)
        counts = {
            r[0]: r[1]
            for r in await conn.fetch(
                "SELECT id, follower_count FROM users WHERE id < $1", layout.first_ordinary
            )
        }
    finally:
        await conn.close()
    n = scale.stream_posts
    authors = [int(a) for a in rng.choice(authors_all, size=n, replace=len(authors_all) < n)]
    schedule = [(scale.stream_seconds * i / n, a, False) for i, a in enumerate(authors)]
    for j in range(scale.stream_celebrity_posts):
        at = scale.stream_seconds * (j + 0.5) / max(1, scale.stream_celebrity_posts)
        schedule.append((at, layout.celebrity, True))
    schedule.sort()
    span = scale.burst_posts * scale.burst_every
    ordinary = int(span * scale.burst_ordinary_rate)
    burst_authors = rng.choice(authors_all, size=ordinary, replace=len(authors_all) < ordinary)
    burst = [(span * i / ordinary, int(a), False) for i, a in enumerate(burst_authors)]
    burst += [(scale.burst_every * i, layout.celebrity, True) for i in range(scale.burst_posts)]
    burst.sort()
    # The read sample: active followers of the stream's authors (one each, at random), so
    # that their first page holds the run's posts; random users would mostly read nothing.
    conn = await asyncpg.connect(system.dsn)
    try:
        rows = await conn.fetch(
            f"SELECT DISTINCT ON (f.followee_id) f.follower_id FROM follows f "
            f"JOIN users u ON u.id = f.follower_id AND u.{drive.ACTIVE_SQL} "
            f"WHERE f.followee_id = ANY($1::bigint[]) ORDER BY f.followee_id, random()",
            sorted(set(authors)),
        )
    finally:
        await conn.close()
    picked = np.array(sorted({r[0] for r in rows} - set(lay_ids(layout))), dtype=np.int64)
    if len(picked) == 0:
        picked = readers
    viewers = [int(v) for v in rng.choice(picked, size=min(len(picked), 300), replace=False)]
    return World(scale, layout, active, inactive, authors, viewers, schedule, burst, counts)


def lay_ids(layout: Layout) -> list[int]:
    """The planted users (their reads belong to the curves)."""
    return [layout.celebrity, layout.big, *layout.ladder, *layout.pool, *layout.viewers.values()]


def _summary(posted: list[Posted], seen: drive.Visibility, chk: check.Check) -> dict[str, Any]:
    plain = [p for p in posted if not p.celebrity]
    celeb = [p for p in posted if p.celebrity]
    vis = [seen.visible_ms[p.post_id] for p in plain]
    return {
        "posts": len(posted),
        "ordinary_posts": len(plain),
        "celebrity_posts": len(celeb),
        "visible_p50_ms": percentile(vis, 0.5),
        "visible_p99_ms": percentile(vis, 0.99),
        "visible_max_ms": max(vis) if vis else float("nan"),
        "within_500ms": sum(v <= 500 for v in vis) / max(1, len(vis)),
        "within_5s": sum(v <= 5000 for v in vis) / max(1, len(vis)),
        "celebrity_visible_ms": [seen.visible_ms[p.post_id] for p in celeb],
        "entries_per_ordinary_post": statistics.mean(chk.entries[p.post_id] for p in plain)
        if plain
        else 0.0,
        "entries_per_celebrity_post": [chk.entries[p.post_id] for p in celeb],
        "celebrity_active_followers": [chk.expected[p.post_id] for p in celeb],
        "pulled_posts": sum(p.post_id in seen.pulled for p in posted),
        "check_ok": chk.ok,
        "problems": chk.problems,
        "pulled_reads_checked": chk.pulled_reads,
        "pulled_reads_unverified": chk.pulled_unverified,
    }


async def _stream(
    system: System, client: Client, w: World, schedule: list[tuple[float, int, bool]], desc: str
) -> tuple[list[Posted], drive.Visibility, dict[str, Any]]:
    mem0 = await drive.used_memory(system)
    cmd0 = await drive.commandstats(system)
    t0 = time.monotonic()
    posted = await drive.post_stream(client, schedule, desc)
    await drive.settle(system)
    seconds = time.monotonic() - t0
    cmd1 = await drive.commandstats(system)
    mem1 = await drive.used_memory(system)
    seen = drive.visibility(posted, await job_results(system.redis))
    calls = sum(cmd1.values()) - sum(cmd0.values())
    writes = {
        k: cmd1.get(k, 0) - cmd0.get(k, 0) for k in ("evalsha", "eval", "zadd", "set", "lpush")
    }
    return (
        posted,
        seen,
        {
            "seconds": seconds,
            "redis_commands_per_post": calls / len(posted),
            "redis_scripts_per_post": (writes["evalsha"] + writes["eval"]) / len(posted),
            "redis_memory_delta_mb": (mem1 - mem0) / 2**20,
            "redis_memory_mb": mem1 / 2**20,
        },
    )


async def compare(system: System, client: Client, w: World, keys: list[str]) -> dict[str, Any]:
    """Scenario 1: the same stream under each strategy, then reads; the naive join last."""
    s = w.scale
    out: dict[str, Any] = {"strategies": {}}
    table = drive.strategies(s.pull_threshold, s.push_threshold)
    for key in keys:
        strategy = table[key]
        print(f"[report] {time.strftime('%H:%M:%S')} strategy: {strategy.label}", flush=True)
        await drive.reset(system, strategy, w.active)
        posted, seen, figures = await _stream(system, client, w, w.schedule, key)
        stream = list(posted)
        reads = await drive.read_loop(
            system, client, w.viewers, s.reads, s.read_clients, desc=f"{key} reads"
        )
        chk = await check.verify(
            system, client, posted, seen, w.active, w.inactive, s.reads_per_viewer_sample
        )
        out["strategies"][key] = {
            "label": strategy.label,
            **figures,
            **_summary(stream, seen, chk),
            "reads": _reads(reads),
        }
    # The naive join: the stock server's naiveFeed on the same database (posts of the last run).
    naive = await drive.read_loop(
        system, client, w.viewers, s.reads, s.read_clients,
        naive_doc=variant_document("naiveFeed"), desc="naive",
    )  # fmt: skip
    out["naive_reads"] = _reads(naive)
    return out


def _reads(r: drive.Reads) -> dict[str, Any]:
    return {
        "reads": len(r.latencies_ms),
        "p50_ms": percentile(r.latencies_ms, 0.5),
        "p99_ms": percentile(r.latencies_ms, 0.99),
        "errors": r.errors,
        "degraded": r.degraded,
        "empty": r.empty,
        "cpu_ms": r.cpu_ms_per_read,
    }


@dataclass
class _More:
    posted: list[Posted]
    seen: drive.Visibility


async def curves(system: System, client: Client, w: World) -> dict[str, Any]:
    """Scenario 3a, in the constant hybrid with the curve's authors pinned push, then pull
    (decision 0026's pins): how the cost grows with followers (push) or followees (pull)."""
    s = w.scale
    hybrid = drive.strategies(s.pull_threshold, s.push_threshold)["hybrid"]
    lay = w.layout
    authors = [lay.celebrity, lay.big, *lay.ladder, *lay.pool]
    out: dict[str, Any] = {}
    for mode in ("push", "pull"):
        print(f"[report] {time.strftime('%H:%M:%S')} curves: authors pinned {mode}", flush=True)
        await drive.reset(system, hybrid, w.active, {a: mode for a in authors})
        more, curve = await _curve(system, client, w)
        chk = await check.verify(
            system, client, more.posted, more.seen, w.active, w.inactive,
            s.reads_per_viewer_sample,
        )  # fmt: skip
        out[mode] = {**curve, "check_ok": chk.ok, "problems": chk.problems}
    return out


async def _curve(system: System, client: Client, w: World) -> tuple[_More, dict[str, Any]]:
    """One post per ladder author (and the 50k author, and the celebrity), one at a time,
    commit -> last timeline written; then the read curve: the viewer following k authors
    (the pool, two posts each) reads its first page."""
    lay = w.layout
    posted: list[Posted] = []
    fanout: list[dict[str, Any]] = []
    seen_all = drive.Visibility({}, set(), {})
    ladder = sorted({**lay.ladder, lay.big: w.scale.big, lay.celebrity: w.scale.celebrity}.items(),
                    key=lambda kv: kv[1])  # fmt: skip
    for author, followers in ladder:
        one = await drive.post_stream(client, [(0.0, author, False)], "ladder")
        await drive.settle(system)
        seen = drive.visibility(one, await job_results(system.redis))
        posted += one
        seen_all.visible_ms.update(seen.visible_ms)
        seen_all.pulled |= seen.pulled
        fanout.append({"followers": followers, "visible_ms": seen.visible_ms[one[0].post_id],
                       "pulled": one[0].post_id in seen.pulled})  # fmt: skip
    pool = [(0.05 * i, a, False) for i, a in enumerate(lay.pool * 2)]
    if pool:
        made = await drive.post_stream(client, pool, "pool")
        await drive.settle(system)
        seen = drive.visibility(made, await job_results(system.redis))
        posted += made
        seen_all.visible_ms.update(seen.visible_ms)
        seen_all.pulled |= seen.pulled
    reads: list[dict[str, Any]] = []
    per = max(50, w.scale.reads // 4)
    for k, viewer in sorted(lay.viewers.items()):
        r = await drive.read_loop(system, client, [viewer], per, 1, desc=f"k={k}", budget_s=30)
        reads.append({"followees": k, **_reads(r)})
    return _More(posted, seen_all), {"fanout": fanout, "reads": reads}


async def burst(system: System, client: Client, w: World, keys: list[str]) -> dict[str, Any]:
    """Scenario 2: the celebrity posts every few seconds while ordinary authors keep posting."""
    s = w.scale
    table = drive.strategies(s.pull_threshold, s.push_threshold)
    out: dict[str, Any] = {}
    for key in keys:
        strategy = table[key]
        print(f"[report] {time.strftime('%H:%M:%S')} burst: {strategy.label}", flush=True)
        await drive.reset(system, strategy, w.active)
        lag: list[tuple[float, float, float]] = []
        stop = asyncio.Event()
        sampler = asyncio.create_task(drive.lag_sampler(system, stop, lag))
        posted, seen, figures = await _stream(system, client, w, w.burst, f"{key} burst")
        stop.set()
        await sampler
        chk = await check.verify(
            system, client, posted, seen, w.active, w.inactive, s.reads_per_viewer_sample
        )
        out[key] = {"label": strategy.label, **figures, **_summary(posted, seen, chk),
                    "lag": lag}  # fmt: skip
    return out


async def sweep(system: System, client: Client, w: World) -> dict[str, Any]:
    """Scenario 3b: the same stream's first posts under several FANOUT_PULL_THRESHOLD values."""
    s = w.scale
    out: dict[str, Any] = {}
    n = min(s.sweep_posts, len(w.schedule))
    schedule = [x for x in w.schedule if not x[2]][:n]
    schedule += [x for x in w.schedule if x[2]]
    for threshold in s.sweep:
        strategy = drive.swept(threshold)
        print(f"[report] {time.strftime('%H:%M:%S')} sweep: {strategy.label}", flush=True)
        await drive.reset(system, strategy, w.active)
        posted, seen, figures = await _stream(system, client, w, schedule, f"T={threshold}")
        reads = await drive.read_loop(
            system, client, w.viewers, max(50, s.reads // 2), s.read_clients, desc=f"T={threshold}"
        )
        chk = await check.verify(
            system, client, posted, seen, w.active, w.inactive, s.reads_per_viewer_sample
        )
        conn = await asyncpg.connect(system.dsn)
        try:
            pulled_authors = await conn.fetchval("SELECT count(*) FROM users WHERE fanout_mode = 1")
        finally:
            await conn.close()
        out[str(threshold)] = {"threshold": threshold, **figures, **_summary(posted, seen, chk),
                               "reads": _reads(reads), "pull_authors": pulled_authors}  # fmt: skip
    return out
