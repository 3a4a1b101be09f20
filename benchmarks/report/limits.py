"""The raw limits of the same servers in the same run, so every figure is also a ratio:
redis-benchmark against the run's redis-server (LPUSH as the articles ran it, ZADD pipelined),
a primary-key fetch on the same PostgreSQL, a bare HTTP endpoint (the stock server's /healthz,
uvicorn + Starlette, no GraphQL)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from app.posts.ids import EPOCH_MS
from app.timelines.store import TimelineStore, timeline_key
from benchmarks.common import percentile, raw_rates
from benchmarks.report.drive import read_loop
from benchmarks.report.system import Client, System


def _redis_benchmark(url: str, *args: str) -> dict[str, float] | None:
    binary = shutil.which("redis-benchmark")
    if not binary:
        return None
    p = urlsplit(url)
    done = subprocess.run(
        [binary, "-h", p.hostname or "127.0.0.1", "-p", str(p.port or 6379), "-q", "--csv", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",...
    last = done.stdout.strip().splitlines()[-1].replace('"', "").split(",")
    return (
        {"rps": float(last[1]), "p50_ms": float(last[4])}
        if len(last) > 4
        else {"rps": float(last[1])}
    )


async def timeline_bytes(system: System) -> dict[str, int]:
    """MEMORY USAGE of one full (800-entry) timeline: the store's packed layout, and the zset
    the articles describe (84 KB as a skiplist; the store wrote it so before decision 0034,
    built here with plain ZADD)."""
    assert system.redis is not None
    base_ms = 1_780_000_000_000
    entries = [(((base_ms + i - EPOCH_MS) << 22), base_ms + i) for i in range(800)]
    store = TimelineStore(system.redis, 800, 200)
    await store.rebuild(-7, entries)
    zset_key = timeline_key(-8)
    await system.redis.zadd(zset_key, {str(post_id): score for post_id, score in entries})
    found = {
        "packed": int(await system.redis.memory_usage(timeline_key(-7), samples=0)),
        "zset": int(await system.redis.memory_usage(zset_key, samples=0)),
    }
    await system.redis.delete(timeline_key(-7), zset_key)
    return found


async def measure(system: System, client: Client, n: int = 100_000) -> dict[str, Any]:
    assert system.redis is not None
    out: dict[str, Any] = {}
    lpush = await asyncio.to_thread(
        _redis_benchmark, system.redis_url, "-t", "lpush", "-n", str(n), "-c", "50"
    )
    out["redis_benchmark_binary"] = lpush is not None
    if lpush is not None:
        out["lpush"] = lpush  # 50 clients, no pipelining: redis-benchmark's defaults
    # ZADD pipelined x64 by redis-benchmark (when there) and a redis-py pipeline of ZADD.
    out["zadd"] = await raw_rates(system.redis, system.redis_url, n)
    await system.redis.flushall()
    out["timeline_800_bytes"] = await timeline_bytes(system)
    conn = await asyncpg.connect(system.dsn)
    try:
        stmt = await conn.prepare("SELECT * FROM users WHERE id = $1")
        top = await conn.fetchval("SELECT max(id) FROM users")
        times = []
        start = time.perf_counter()
        for i in range(5000):
            t = time.perf_counter()
            await stmt.fetchrow(1 + (i * 7919) % top)
            times.append((time.perf_counter() - t) * 1000)
        out["pk_fetch"] = {
            "rps": 5000 / (time.perf_counter() - start),
            "p50_ms": percentile(times, 0.5),
            "p99_ms": percentile(times, 0.99),
        }
    finally:
        await conn.close()
    bare = await read_loop(system, client, [1], 2000, 4, bare=True, desc="bare http")
    out["bare_http"] = {
        "p50_ms": percentile(bare.latencies_ms, 0.5),
        "p99_ms": percentile(bare.latencies_ms, 0.99),
        "cpu_ms": bare.cpu_ms_per_read["service"],
    }
    return out
