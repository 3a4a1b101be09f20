"""The timeline layout through `TimelineStore` itself (issue 12): `packed` (8-byte ids in a
string). The zset layout it was compared with is retired (decision 0034): its last figures
stay in docs/benchmarks/archive.md; what remains of it is the one-way conversion, measured here.

    python -m benchmarks.timeline_encoding --redis-url redis://127.0.0.1:6379/15

Per layout: memory of full 800-entry timelines (MEMORY USAGE ... SAMPLES 0 averaged over
many keys, and the INFO used_memory delta over all of them), Redis server time per insert
into full timelines (INFO commandstats EVALSHA usec / inserts, and the Redis process's CPU
time when the server runs on this machine), replays, out-of-order inserts, missing keys,
reads (`latest`, `before`, the hub's `latest_many`, pull-mode author indexes) and the
one-way conversion of full zset timelines (`app.timelines.convert`). `benchmarks.fanout_path` runs this too, next to the real worker path.

It FLUSHES the db it is given (db 0 is refused). Other clients of the same server add their
own commands to nothing here (deltas of our commands only), but they share the CPU: quote
ratios from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from app.timelines.convert import convert_zsets
from app.timelines.packed import default_trim_slack
from app.timelines.store import (
    POST_ID_EPOCH_MS,
    TimelineStore,
    author_posts_key,
    timeline_key,
)
from benchmarks.common import is_loopback, scratch_redis_url

FULL = 800
ENCODINGS = ("packed",)  # the zset layout is retired (decision 0034)
BASE_MS = 1_790_000_000_000  # late 2026: ids are 19 digits and below 2^63
# Server-side copy of one template key into many (fast fill; keeps the layout and, for
# strings, a fresh allocation like the store's own rewrites).
COPY_SCRIPT = """
for i = 1, #ARGV do
  redis.call('COPY', KEYS[1], ARGV[i], 'REPLACE')
end
return #ARGV
"""
NESTED = ("getrange", "append", "setrange", "strlen", "zcard", "zadd", "zremrangebyrank")


def post_id(ms: int, seq: int = 0) -> int:
    return ((ms - POST_ID_EPOCH_MS) << 22) | seq


@dataclass
class Figures:
    """One layout's results (None: not measured)."""

    encoding: str
    values: dict[str, Any] = field(default_factory=dict)


class Bench:
    def __init__(self, redis: Redis, args: argparse.Namespace) -> None:
        self.r = redis
        self.args = args
        self.clock = BASE_MS  # every pushed post is newer than the last one
        self.pid: int | None = None

    async def setup(self) -> None:
        info = await self.r.info("server")
        stat = f"/proc/{info['process_id']}/stat"
        if is_loopback(self.args.redis_url) and os.path.exists(stat):  # noqa: ASYNC240
            self.pid = int(info["process_id"])

    # -- measurement helpers --------------------------------------------------------------

    def cpu_seconds(self) -> float | None:
        if self.pid is None:
            return None
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def cmdstats(self) -> dict[str, tuple[int, int]]:
        info = await self.r.info("commandstats")
        return {
            k.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
            for k, v in info.items()
            if isinstance(v, dict)
        }

    async def measure(
        self, fn: Callable[[], Awaitable[Any]]
    ) -> tuple[float, dict[str, tuple[int, int]], float | None, Any]:
        """Wall seconds, commandstats deltas, Redis CPU seconds, result of one coroutine."""
        before, cpu0 = await self.cmdstats(), self.cpu_seconds()
        t0 = time.perf_counter()
        result = await fn()
        wall = time.perf_counter() - t0
        cpu1, after = self.cpu_seconds(), await self.cmdstats()
        delta = {
            k: (c - before.get(k, (0, 0))[0], u - before.get(k, (0, 0))[1])
            for k, (c, u) in after.items()
            if c != before.get(k, (0, 0))[0]
        }
        cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
        return wall, delta, cpu, result

    async def flush(self) -> None:
        await self.r.flushdb(asynchronous=True)
        for _ in range(2400):
            if not int((await self.r.info("memory")).get("lazyfree_pending_objects", 0)):
                return
            await asyncio.sleep(0.05)

    async def used_memory(self) -> int:
        return int((await self.r.info("memory"))["used_memory"])

    def next_post(self) -> tuple[int, int]:
        self.clock += 1000
        return post_id(self.clock), self.clock

    # -- filling --------------------------------------------------------------------------

    async def fill(self, store: TimelineStore, users: Sequence[int]) -> int:
        """Every timeline full: 800 entries older than anything pushed later. Packed
        timelines also carry 0..slack-1 hidden entries, spread evenly over the users, as in
        a steady state where each is somewhere between two amortized trims. Returns the
        number of templates."""
        copy = self.r.register_script(COPY_SCRIPT)
        old = [(post_id(BASE_MS - 1000 * (i + 1)), BASE_MS - 1000 * (i + 1)) for i in range(FULL)]
        phases = store.timeline_slack
        for phase in range(phases):
            template = -1 - phase
            await store.rebuild(template, old)
            for j in range(phase):  # appends past the bound, newer than `old`
                ms = BASE_MS - 500 + j
                await store.push_to_timelines(post_id(ms), ms, [template])
            targets = [u for u in users if u % phases == phase]
            for i in range(0, len(targets), 2000):
                keys = [timeline_key(u) for u in targets[i : i + 2000]]
                await copy(keys=[timeline_key(template)], args=keys)
            await self.r.delete(timeline_key(template))
        return phases

    # -- phases ---------------------------------------------------------------------------

    async def layout(self, encoding: str) -> Figures:
        out = Figures(encoding)
        v = out.values
        store = TimelineStore(self.r, FULL, 200, script_batch=self.args.batch)
        n = self.args.timelines
        users = list(range(1, n + 1))
        await self.flush()
        mem0 = await self.used_memory()
        await self.fill(store, users)
        v["used_memory_per_entry"] = (await self.used_memory() - mem0) / (n * FULL)
        v["memory_per_entry"] = await self.memory_per_entry(users)
        v["slack"] = store.timeline_slack

        # One 800-entry timeline just rebuilt, and one grown from empty by 800 appends.
        await store.rebuild(
            -100, [(post_id(BASE_MS - i - 1), BASE_MS - i - 1) for i in range(FULL)]
        )
        v["memory_800_rebuilt"] = await self.r.memory_usage(timeline_key(-100), samples=0)
        await store.rebuild(-101, [])
        for i in range(FULL):
            ms = BASE_MS - FULL + i
            await store.push_to_timelines(post_id(ms), ms, [-101])
        v["memory_800_appended"] = await self.r.memory_usage(timeline_key(-101), samples=0)
        await self.r.delete(timeline_key(-100), timeline_key(-101))

        # Inserts into full timelines: each post to all n, in script batches, pipelined.
        runs = []
        for _ in range(self.args.posts):
            pid, ms = self.next_post()
            push = functools.partial(store.push_to_timelines, pid, ms, users)
            runs.append(await self.measure(push))
        wall = sum(r[0] for r in runs)
        usec = sum(r[1].get("evalsha", (0, 0))[1] for r in runs)
        inserts = n * len(runs)
        v["server_us_per_insert"] = usec / inserts
        v["server_us_per_insert_runs"] = "/".join(
            f"{r[1].get('evalsha', (0, 0))[1] / n:.1f}" for r in runs
        )
        cpus = [r[2] for r in runs]
        v["cpu_us_per_insert"] = None if None in cpus else 1e6 * sum(cpus) / inserts  # type: ignore[arg-type]
        v["inserts_s"] = inserts / wall
        v["breakdown"] = " ".join(
            f"{cmd} {sum(r[1].get(cmd, (0, 0))[1] for r in runs) / inserts:.2f}"
            for cmd in NESTED
            if any(cmd in r[1] for r in runs)
        )
        v["written"] = sum(int(r[3]) for r in runs)
        v["memory_per_entry_after"] = await self.memory_per_entry(users)

        # Replay of the last post (idempotent), and a late post (older than the newest).
        _, delta, _, added = await self.measure(lambda: store.push_to_timelines(pid, ms, users))
        v["replay_us_per_key"] = delta.get("evalsha", (0, 0))[1] / n
        v["replay_written"] = added
        late = post_id(ms - 1)
        _, delta, _, _ = await self.measure(lambda: store.push_to_timelines(late, ms - 1, users))
        v["late_us_per_insert"] = delta.get("evalsha", (0, 0))[1] / n

        await self.reads(store, v)
        await self.authors(store, v)

        # Missing timelines: skipped.
        missing = list(range(n + 1, 2 * n + 1))
        pid, ms = self.next_post()
        _, delta, _, _ = await self.measure(lambda: store.push_to_timelines(pid, ms, missing))
        v["missing_us_per_key"] = delta.get("evalsha", (0, 0))[1] / n

        # The one-way conversion of full zset timelines (an earlier release's layout).
        keys = [timeline_key(u) for u in users[: self.args.convert]]
        zset = {str(p): ms for p, ms in (self.next_post() for _ in range(FULL))}
        await self.r.zadd(timeline_key(-102), zset)
        await self.r.register_script(COPY_SCRIPT)(keys=[timeline_key(-102)], args=keys)
        _, delta, _, _ = await self.measure(lambda: convert_zsets(self.r, keys, FULL))
        v["convert_us_per_key"] = delta.get("evalsha", (0, 0))[1] / len(keys)
        v["convert_to"] = "packed (from zset)"
        await self.flush()
        return out

    async def memory_per_entry(self, users: Sequence[int]) -> float:
        step = max(1, len(users) // self.args.memory_samples)
        sample = users[::step]
        sizes = []
        for i in range(0, len(sample), 500):
            async with self.r.pipeline(transaction=False) as pipe:
                for u in sample[i : i + 500]:
                    pipe.memory_usage(timeline_key(u), samples=0)
                sizes += [int(s) for s in await pipe.execute()]
        return statistics.mean(sizes) / FULL

    async def reads(self, store: TimelineStore, v: dict[str, Any]) -> None:
        """Server and wall time per call of the read path's operations on full timelines."""
        calls = self.args.read_calls
        users = list(range(1, 101))

        async def latest(limit: int) -> None:
            for i in range(calls):
                await store.latest_or_none(users[i % 100], limit)

        async def before(depth: int) -> None:
            # A cursor `depth` entries down: the full timelines were filled 1 s apart.
            cursor_ms = BASE_MS - 1000 * depth
            for i in range(calls):
                await store.before(users[i % 100], cursor_ms, post_id(cursor_ms), 21)

        async def hub() -> None:
            for i in range(calls // 20):
                await store.latest_many(list(range(1 + 200 * (i % 50), 201 + 200 * (i % 50))), 200)

        cases: list[tuple[str, Callable[[], Awaitable[None]], int]] = [
            ("latest(21)", lambda: latest(21), calls),
            ("latest(500)", lambda: latest(500), calls),
            ("before(21) at 100", lambda: before(100), calls),
            ("before(21) at 600", lambda: before(600), calls),
            ("latest_many(200 users, 200)", hub, calls // 20),
        ]
        for name, fn, count in cases:
            cpu0 = time.process_time()
            wall, delta, _, _ = await self.measure(fn)
            cpu = time.process_time() - cpu0
            usec = sum(delta.get(cmd, (0, 0))[1] for cmd in ("zrange", "getrange"))
            v[f"read {name} server us"] = usec / count
            v[f"read {name} wall us"] = wall * 1e6 / count
            v[f"read {name} client us"] = cpu * 1e6 / count

    async def authors(self, store: TimelineStore, v: dict[str, Any]) -> None:
        """Pull-mode reads: 50 author indexes of 200 posts, 50 newest of each (the feed)."""
        authors = list(range(1, 51))
        for a in authors:
            await store.rebuild_author(
                a, [(post_id(BASE_MS - 1000 * i - a), BASE_MS - 1000 * i - a) for i in range(200)]
            )
        calls = self.args.read_calls // 10

        async def pull() -> None:
            for _ in range(calls):
                await store.author_latest_many_or_none(authors, 50)

        cpu0 = time.process_time()
        wall, delta, _, _ = await self.measure(pull)
        cpu = time.process_time() - cpu0
        usec = sum(delta.get(cmd, (0, 0))[1] for cmd in ("zrange", "getrange"))
        v["read author_latest_many(50 authors, 50) server us"] = usec / calls
        v["read author_latest_many(50 authors, 50) wall us"] = wall * 1e6 / calls
        v["read author_latest_many(50 authors, 50) client us"] = cpu * 1e6 / calls
        v["author index memory (200 entries)"] = await self.r.memory_usage(
            author_posts_key(1), samples=0
        )
        await self.r.delete(*(author_posts_key(a) for a in authors))


# -- report ---------------------------------------------------------------------------------

ROWS: list[tuple[str, str, str]] = [
    # (key, label, format)
    ("memory_per_entry", "memory, full timelines: B/entry (MEMORY USAGE avg)", ".2f"),
    ("memory_per_entry_after", "  same, after the inserts below", ".2f"),
    ("used_memory_per_entry", "  INFO used_memory delta / entries", ".2f"),
    ("memory_800_rebuilt", "  one 800-entry timeline, rebuilt: B", ",.0f"),
    ("memory_800_appended", "  one 800-entry timeline grown by 800 appends: B", ",.0f"),
    ("slack", "  amortized-trim slack (entries past 800)", "d"),
    ("server_us_per_insert", "insert into full timelines: Redis us/insert (commandstats)", ".2f"),
    ("server_us_per_insert_runs", "  per post", "s"),
    ("cpu_us_per_insert", "  Redis process CPU us/insert", ".2f"),
    ("breakdown", "  nested commands us/insert", "s"),
    ("inserts_s", "  inserts/s (one client, pipelined batches)", ",.0f"),
    ("replay_us_per_key", "replay (idempotent): us/key", ".2f"),
    ("replay_written", "  timelines that gained the replayed post", ",d"),
    ("late_us_per_insert", "late post (older than the newest): us/insert", ".2f"),
    ("missing_us_per_key", "missing timeline, skipped: us/key", ".2f"),
    ("read latest(21) server us", "read latest(21): Redis us", ".2f"),
    ("read latest(21) wall us", "  wall us per call (client included)", ".0f"),
    ("read latest(21) client us", "  client CPU us per call (this process)", ".0f"),
    ("read latest(500) server us", "read latest(500) (RANKED first page): Redis us", ".2f"),
    ("read latest(500) wall us", "  wall us per call", ".0f"),
    ("read latest(500) client us", "  client CPU us per call (this process)", ".0f"),
    ("read before(21) at 100 server us", "read before(21), 100 deep: Redis us", ".2f"),
    ("read before(21) at 100 wall us", "  wall us per call", ".0f"),
    ("read before(21) at 100 client us", "  client CPU us per call (this process)", ".0f"),
    ("read before(21) at 600 server us", "read before(21), 600 deep: Redis us", ".2f"),
    ("read before(21) at 600 wall us", "  wall us per call", ".0f"),
    ("read before(21) at 600 client us", "  client CPU us per call (this process)", ".0f"),
    (
        "read latest_many(200 users, 200) server us",
        "hub latest_many(200 users x 200): Redis us",
        ".0f",
    ),
    ("read latest_many(200 users, 200) wall us", "  wall us per call", ".0f"),
    (
        "read latest_many(200 users, 200) client us",
        "  client CPU us per call (this process)",
        ".0f",
    ),
    (
        "read author_latest_many(50 authors, 50) server us",
        "pull authors (50 x 50): Redis us",
        ".1f",
    ),
    ("read author_latest_many(50 authors, 50) wall us", "  wall us per call", ".0f"),
    (
        "read author_latest_many(50 authors, 50) client us",
        "  client CPU us per call (this process)",
        ".0f",
    ),
    ("author index memory (200 entries)", "author index, 200 entries: B", ",.0f"),
    ("convert_us_per_key", "background conversion of a full timeline: Redis us/key", ".0f"),
    ("convert_to", "  converted to", "s"),
]


def _fmt(value: Any, spec: str) -> str:
    if value is None:
        return "n/a"
    if spec == "s":
        return str(value)
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


def report(figures: Sequence[Figures]) -> str:
    """A markdown table, one column per layout."""
    head = "| | " + " | ".join(f"`{f.encoding}`" for f in figures) + " |"
    out = [head, "|---|" + "---:|" * len(figures)]
    for key, label, spec in ROWS:
        if not any(key in f.values for f in figures):
            continue
        cells = [_fmt(f.values.get(key), spec) for f in figures]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


async def run(args: argparse.Namespace) -> list[Figures]:
    redis = Redis.from_url(scratch_redis_url(args.redis_url))
    try:
        bench = Bench(redis, args)
        await bench.setup()
        figures = []
        for encoding in args.encodings.split(","):
            if encoding not in ENCODINGS:
                raise SystemExit(f"unknown encoding {encoding}")
            print(f"  [timeline_encoding] {encoding} ...", file=sys.stderr, flush=True)
            figures.append(await bench.layout(encoding))  # type: ignore[arg-type]
        return figures
    finally:
        await redis.flushdb()
        await redis.aclose()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timelines", type=int, default=50_000, help="full timelines per layout")
    p.add_argument("--posts", type=int, default=10, help="posts pushed into all of them")
    p.add_argument("--batch", type=int, default=1000, help="keys per script call")
    p.add_argument("--memory-samples", type=int, default=2000)
    p.add_argument("--read-calls", type=int, default=2000)
    p.add_argument("--convert", type=int, default=5000, help="timelines converted")
    p.add_argument("--encodings", default="packed")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    add_arguments(p)
    args = p.parse_args()
    print(f"slack for 800 entries: {default_trim_slack(FULL)}", file=sys.stderr)
    figures = asyncio.run(run(args))
    print(report(figures))


if __name__ == "__main__":
    main()
