"""Feed pages under a native load generator (wrk + Lua), next to the stock Strawberry ceiling
and the naive join, in one run on the same machine and data (issue 10).

    python -m benchmarks.feed_wrk [--reuse-db NAME] [--connections 50] [--seconds 10]
        [--workers 2] [--users 100000 --avg-following 50 --posts 2000000]

benchmarks/feed_read.py drives the servers from Python (httpx): its client costs 1.3-2.5 ms
of CPU per request on the cores the servers need. wrk costs tens of microseconds per request
(plus ~0.03 cores for its 50 threads), so what is left on the machine is the servers',
Postgres' and Redis' work. Needs `wrk` (Debian package: `apt-get install -y wrk`); without it
this prints that command and exits 2. It installs nothing.

What it does, in order:
1. Database: as feed_read (its helpers): a scratch database on DATABASE_URL's server, seeded
   by devtools.seed's seed_bulk; `--reuse-db NAME` seeds NAME only when it is empty and keeps
   it, so later runs skip the seeding (2-4 min).
2. Redis: a private `redis-server` on a free port (no persistence), stopped at the end, so
   no other work's Redis db is flushed and Redis' CPU is measured alone; `--redis-url URL`
   uses that server's db instead (never db 0; FLUSHED before and after).
3. Servers: `uvicorn app.web:app --workers 2` (uvloop + httptools, as feed_read), the
   stock server, `uvicorn benchmarks.stock_server:app --workers 2`, and the bare handler,
   `uvicorn benchmarks.anchor_server:app --workers 2`, on their own ports, same
   database and SECRET_KEY. Viewers as feed_read: --viewers random active users ("random",
   mostly light) and every user following 1,000-2,000 accounts ("heavy"); tokens from
   app.auth.tokens.issue_token. Warm-up as feed_read (every viewer's timeline rebuilt and
   every variant read once per viewer).
4. Load: per variant and viewer class, `wrk -tN -cN` with benchmarks/wrk/feed.lua (N =
   --connections: one connection per wrk thread, see the script) for --seconds (the naive
   join: --naive-seconds), after a --warmup run of wrk that is not measured, each started
   once the servers and Postgres are idle again. Every connection is opened first and sends
   its first request 1 s later, all at once (see the script's delay(): a busy uvloop worker
   accepts one connection per event-loop iteration):
     stock   memoryFeed(first: 20) on the stock server: the same Post/User types in a plain
             Strawberry schema with only its parser and validation caches, a 20-post page
             from memory: the stock ceiling (viewer class irrelevant: run first and last)
     next    feed next pages: a RANKED first page, then `after: endCursor` while hasNextPage,
             up to --max-pages pages (25 = FEED_SESSION_SIZE / 20: one frozen session), then a
             new first page (also on CURSOR_EXPIRED or any error); only the next pages count
             in its req/s and percentiles, the first pages are reported beside them
     chrono  feed(first: 20, mode: CHRONOLOGICAL) first pages
     ranked  feed(first: 20) RANKED first pages (each ranks and freezes a new session)
     naive   naiveFeed(first: 20) on the stock server: follows JOIN posts ORDER BY created_at
             DESC LIMIT 20, every request
     next-text, chrono-text, ranked-text: next, chrono and ranked with the Feed query sent as
             unregistered text (`as_text`: the same query on one line, as an ad-hoc client
             or GraphiQL sends it); next, chrono and ranked send the registered document by
             `documentId`
     anchor  next pages as `next`, on the bare handler (benchmarks/anchor_server.py: the same
             session read, filter query, hydration and JSON with asyncpg, redis-py and
             orjson, no GraphQL): the physical limit of this design; every variant's rate
             is reported as a ratio to it too ("x anchor", per viewer class)
   Every variant sends the Feed selection set of graphql/operations/feed.graphql.
   `--before-env KEY=VALUE,...` starts the API a second time with those settings (a change
   turned off) and runs `--before-variants` on it as well: before and after in one run;
   `--before-root DIR` starts that second API from another checkout (the baseline commit's
   code on the same database, venv, Redis and machine).
5. Measures per run: pages/s over the window from the first request to the last answer;
   p50/p99 from the script's own per-request timings (wrk's histogram is in the JSON too, but
   wrk "corrects" it for coordinated omission); requests still in flight when wrk stops are
   counted at what they had waited, and when that raises the p99 it is printed as ">= X", a
   lower bound (the naive join's heavy answers); non-200s, GraphQL errors, CURSOR_EXPIRED,
   socket errors; degraded answers ("degraded":true); CPU per request of the uvicorn process
   tree under test, of Postgres (the backends of this database) + Redis, and of wrk itself;
   the machine's other load (busy cores that were not ours: other work on the machine).
6. Prints a markdown table, the issue's targets with their ratios, and a JSON line per run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from redis.asyncio import Redis

from app.auth.tokens import issue_token
from app.config import PROJECT_ROOT, Settings
from app.operation_documents import document_id
from benchmarks.common import (
    Postgres,
    base_database_url,
    cpu_seconds,
    free_port,
    is_loopback,
    percentile,
    pg_cpu_delta,
    private_redis,
    process_tree,
    release_database,
    scratch_redis_url,
    seeded_parser,
    start_server,
    stop_process,
    stop_processes,
    wait_for_redis,
    wait_for_timelines,
)
from benchmarks.feed_read import (
    API_APP,
    PAGE,
    STOCK_APP,
    check,
    data_set,
    each,
    ensure_seeded,
    pick_viewers,
    variants,
    wait_ready,
)
from devtools.provision import create_database

LUA_SCRIPT = Path(__file__).with_name("wrk") / "feed.lua"
START_DELAY_S = 1  # the script's first requests wait this long (connections opened first)
INSTALL_HINT = "apt-get install -y wrk"
FEED_VARIANTS = ("next", "chrono", "ranked", "next-text", "chrono-text", "ranked-text")
VARIANTS = (*FEED_VARIANTS, "anchor", "naive")
NEXT_KEYS = frozenset({"next", "next-text", "anchor"})  # cursor following: next pages count
ANCHOR_APP = "benchmarks.anchor_server:app"  # the bare handler (issue 24)
BEFORE = "app.web:app (before)"  # the API again, with --before-env
CLASSES = ("random", "heavy")
LABELS = {
    "stock": "stock ceiling (memoryFeed, plain Strawberry)",
    "next": "feed next pages (RANKED, following endCursor)",
    "chrono": "feed CHRONOLOGICAL first page",
    "ranked": "feed RANKED first page",
    "next-text": "feed next pages, sent as text",
    "chrono-text": "feed CHRONOLOGICAL first page, sent as text",
    "ranked-text": "feed RANKED first page, sent as text",
    "anchor": "bare handler next pages (anchor)",
    "naive": "naive join (naiveFeed)",
}
CLASS_LABELS = {"random": "random active", "heavy": "heavy", "any": "-"}
CURSOR_MARK = "@@CURSOR@@"

# The issue's targets (one run, 2 workers, 50 connections).
TARGET_RATIO = {"next": 1.5, "chrono": 1.0, "ranked": 0.8, "next-text": 1.0}  # x stock req/s
TARGET_ANCHOR = 0.8  # registered next pages, x the bare handler's next pages/s
TARGET_NEXT_PER_S = 1000
TARGET_P99_MS = 200
TARGET_NAIVE_P99 = 5.0  # heavy viewers: naive join p99 / feed p99
TARGET_DEGRADED = 0.01


# -- processes and CPU ---------------------------------------------------------------------


def is_worker(pid: int) -> bool:
    """A uvicorn worker, not multiprocessing's resource tracker (both are the parent's)."""
    try:
        return b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def machine_busy() -> float:
    """CPU-seconds the whole machine spent busy since boot (all cores; /proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """CPU of this process's children that have been waited for (wrk, once it exits)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def before_label(args: argparse.Namespace) -> str:
    """What the `before` server differs by ("" when there is none): its settings and/or the
    commit of the checkout it runs (--before-root)."""
    parts = [args.before_env] if args.before_env else []
    if args.before_root:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=args.before_root,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        parts.append(f"commit {rev or args.before_root}")
    return ", ".join(parts)


def code_state() -> str:
    """The commit the servers ran and the service files that differed from it (others may be
    editing the tree while this runs: the servers import it once, at their start)."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", "app", "jobs", "benchmarks/stock_server.py"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        return "code: not a git checkout"
    files = [line[3:] for line in changed if line.strip()]
    if not files:
        return f"code: commit {rev}, service files as committed"
    return f"code: commit {rev} with uncommitted changes in {', '.join(files)}"


# -- wrk -----------------------------------------------------------------------------------


def lua_string(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    )
    return f'"{escaped}"'


@dataclass
class Workload:
    """What one wrk run sends: the Lua data file's content."""

    key: str  # stock, next, chrono, ranked, naive
    cls: str  # random, heavy, any
    server: str  # API_APP or STOCK_APP
    mode: str  # first | next
    tokens: list[str]
    first_body: str
    next_prefix: str = ""
    next_suffix: str = ""
    label: str = ""  # appended to the variant's label (the --before-env server's runs)

    def lua(self, seed: int, max_pages: int, latency_dir: Path | None) -> str:
        tokens = ",\n    ".join(lua_string(t) for t in self.tokens)
        lines = [
            "return {",
            f"  mode = {lua_string(self.mode)},",
            '  path = "/graphql",',
            f"  seed = {seed},",
            f"  max_pages = {max_pages},",
            f"  first_body = {lua_string(self.first_body)},",
            f"  next_prefix = {lua_string(self.next_prefix)},",
            f"  next_suffix = {lua_string(self.next_suffix)},",
        ]
        if latency_dir is not None:
            lines.append(f"  latency_dir = {lua_string(str(latency_dir))},")
        lines += [f"  tokens = {{\n    {tokens}\n  }},", "}", ""]
        return "\n".join(lines)


def run_wrk(
    wrk: str, url: str, data: Path, connections: int, seconds: int, timeout: int, log: Path
) -> tuple[dict[str, float], float]:
    """One wrk run: its FEED_WRK_RESULT numbers and its CPU seconds."""
    argv = [
        wrk,
        f"-t{connections}",
        f"-c{connections}",
        f"-d{seconds + START_DELAY_S}s",
        "--timeout",
        f"{timeout}s",
        "-s",
        str(LUA_SCRIPT),
        url,
        "--",
        str(data),
    ]
    before = children_cpu()
    env = {**os.environ, "FEED_WRK_START_DELAY_MS": str(START_DELAY_S * 1000)}
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=seconds + timeout + 60, env=env
    )
    cpu = children_cpu() - before
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}\n")
    for line in done.stdout.splitlines():
        if line.startswith("FEED_WRK_RESULT "):
            text = line.removeprefix("FEED_WRK_RESULT ")
            for bad in ("-nan", "nan", "inf"):
                text = text.replace(f":{bad}", ":null")
            return json.loads(text), cpu
    raise RuntimeError(f"wrk gave no result (exit {done.returncode}):\n{done.stdout}{done.stderr}")


@dataclass
class Timings:
    """The script's per-request timings: ms, sorted, by kind ("f" first pages, "n" next
    pages); the window they span (first request sent to last answer, s); and how long the
    requests wrk dropped at the stop had waited by then (ms, a lower bound on their latency)."""

    latencies: dict[str, list[float]]
    seconds: float
    inflight: list[float]


def read_timings(directory: Path, inflight_since: str, seconds: float) -> Timings:
    """`seconds`: the run's measured length, the window when no request was answered."""
    found: dict[str, list[float]] = {"f": [], "n": []}
    sent, answered = math.inf, -math.inf
    for path in directory.glob("*.lat"):
        for line in path.read_text().splitlines():
            with contextlib.suppress(KeyError, ValueError, IndexError):
                kind, micros, end = line.split(" ")[:3]
                latency, at = float(micros), float(end)
                found[kind].append(latency / 1000)
                sent, answered = min(sent, at - latency), max(answered, at)
    for values in found.values():
        values.sort()
    pending = [float(v) for v in inflight_since.split()]
    if answered <= sent:  # nothing answered: every request waited the whole run, at least
        if not pending:
            return Timings(found, 0.0, [])
        sent = min(pending)
        answered = sent + seconds * 1e6
    waited = [(answered - v) / 1000 for v in pending if v < answered]
    return Timings(found, (answered - sent) / 1e6, sorted(waited))


# -- one measured run ----------------------------------------------------------------------


@dataclass
class Run:
    key: str
    cls: str
    seconds: float = 0.0
    requests: int = 0  # every response wrk completed
    wrk: dict[str, float] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    inflight: list[float] = field(default_factory=list)  # ms waited by dropped requests
    server_cpu: float = 0.0
    pg_cpu: float = 0.0
    redis_cpu: float = 0.0
    wrk_cpu: float = 0.0
    others_cores: float = 0.0
    loadavg: float = 0.0
    label_suffix: str = ""

    @property
    def kind(self) -> str:
        return "n" if self.key in NEXT_KEYS else "f"

    @property
    def pages(self) -> int:
        return len(self.latencies.get(self.kind, []))

    @property
    def rate(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0

    def pct(self, q: float, kind: str | None = None) -> float:
        return percentile(self.latencies.get(kind or self.kind, []), q)

    def bound(self, q: float) -> float:
        """The q-quantile with the requests wrk dropped at the stop counted at what they
        had waited: a lower bound on the true quantile (up to wrk's 0.1 s stop granularity)."""
        return percentile(sorted([*self.latencies.get(self.kind, []), *self.inflight]), q)

    def p99(self) -> tuple[float, bool]:
        """(p99, True when it is the lower bound: dropped requests outwaited the answers)."""
        answered, bound = self.pct(0.99), self.bound(0.99)
        if not math.isnan(bound) and (math.isnan(answered) or bound > answered):
            return bound, True
        return answered, False

    def counter(self, name: str) -> int:
        return int(self.wrk.get(f"c_{name}") or 0)

    @property
    def socket_errors(self) -> int:
        return sum(int(self.wrk.get(f"err_{k}") or 0) for k in ("connect", "read", "write"))

    @property
    def timeouts(self) -> int:
        return int(self.wrk.get("err_timeout") or 0)

    @property
    def degraded_share(self) -> float:
        responses = self.counter("responses")
        return self.counter("degraded") / responses if responses else float("nan")

    def per_request_ms(self, cpu: float) -> float:
        return cpu * 1000 / self.requests if self.requests else float("nan")

    @property
    def total_cpu_ms(self) -> float:
        """Server + Postgres + Redis CPU per request."""
        return self.per_request_ms(self.server_cpu + self.pg_cpu + self.redis_cpu)

    def record(self, stock_rate: float) -> dict[str, Any]:
        firsts = self.latencies.get("f", [])
        return {
            "variant": self.key,
            "viewers": self.cls,
            "label": LABELS[self.key] + self.label_suffix,
            "seconds": round(self.seconds, 2),
            "pages": self.pages,
            "pages_per_s": round(self.rate, 1),
            "x_stock": round(self.rate / stock_rate, 3) if stock_rate else None,
            "p50_ms": round(self.pct(0.50), 2),
            "p90_ms": round(self.pct(0.90), 2),
            "p99_ms": round(self.pct(0.99), 2),
            "max_ms": round(self.pct(1.0), 2),
            "p99_lower_bound_ms": round(self.bound(0.99), 2),
            "inflight_at_stop": len(self.inflight),
            "inflight_max_wait_ms": round(max(self.inflight, default=0.0), 2),
            "requests": self.requests,
            "first_pages_in_run": len(firsts) if self.kind == "n" else None,
            "first_page_p99_ms": round(percentile(firsts, 0.99), 2) if self.kind == "n" else None,
            "wrk_p50_ms": round((self.wrk.get("wrk_p50_us") or 0) / 1000, 2),
            "wrk_p99_ms": round((self.wrk.get("wrk_p99_us") or 0) / 1000, 2),
            "non200": self.counter("non200"),
            "graphql_errors": self.counter("errors"),
            "cursor_expired": self.counter("expired"),
            "socket_errors": self.socket_errors,
            "timeouts": self.timeouts,
            "empty_pages": self.counter("empty"),
            "degraded": self.counter("degraded"),
            "degraded_share": round(self.degraded_share, 4),
            "sessions": self.counter("sessions") if self.kind == "n" else None,
            "session_ends": self.counter("session_ends") if self.kind == "n" else None,
            "sessions_capped": self.counter("capped") if self.kind == "n" else None,
            "server_cpu_ms_per_req": round(self.per_request_ms(self.server_cpu), 3),
            "pg_cpu_ms_per_req": round(self.per_request_ms(self.pg_cpu), 3),
            "redis_cpu_ms_per_req": round(self.per_request_ms(self.redis_cpu), 3),
            "wrk_cpu_us_per_req": round(self.per_request_ms(self.wrk_cpu) * 1000, 1),
            "total_cpu_ms_per_req": round(self.total_cpu_ms, 3),
            "other_load_cores": round(self.others_cores, 2),
            "loadavg_1m": round(self.loadavg, 2),
        }


@dataclass
class Bench:
    args: argparse.Namespace
    wrk: str
    bases: dict[str, str]
    pids: dict[str, list[int]]
    redis_pid: int | None
    postgres: Postgres
    workdir: Path
    log: Path

    def all_server_pids(self) -> list[int]:
        return [p for pids in self.pids.values() for p in pids]

    async def settle(self, limit: float = 90.0) -> None:
        """Wait until the servers and Postgres are idle: a run left requests in flight (the
        naive join's can take seconds), and their work must not count in the next run."""
        deadline = time.monotonic() + limit
        pids = self.all_server_pids()
        while time.monotonic() < deadline:
            before = cpu_seconds(pids)
            await asyncio.sleep(0.3)
            busy = (cpu_seconds(pids) - before) / 0.3
            if busy < 0.15 and await self.postgres.active() == 0:
                return

    def profile(self, load: Workload, seconds: int) -> list[subprocess.Popen[bytes]]:
        """--profile KEY[:CLASS],...: py-spy on each server worker during those measured runs
        (its own CPU lands on the same cores: compare shares, not that run's rates)."""
        wanted = set((self.args.profile or "").split(","))
        if not wanted & {load.key, f"{load.key}:{load.cls}"}:
            return []
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        procs = []
        pids = self.pids[load.server]
        # [0] is uvicorn's supervisor, unless it runs one worker itself (--workers 1).
        for pid in pids[1:] if len(pids) > 1 else pids:
            if not is_worker(pid):
                continue
            out = self.workdir / f"profile-{load.key}-{load.cls}-{pid}.txt"
            print(f"profiling pid {pid} -> {out}", flush=True)
            cmd = [spy, "record", "-p", str(pid), "-d", str(seconds), "-r", "250"]
            procs.append(
                subprocess.Popen(
                    [*cmd, "-f", "raw", "-o", str(out)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        return procs

    async def wrk_run(self, load: Workload, seconds: int, measured: bool) -> Run:
        run = Run(load.key, load.cls)
        tag = f"{load.key}-{load.cls}-{'m' if measured else 'w'}-{uuid.uuid4().hex[:4]}"
        latency_dir = self.workdir / tag
        latency_dir.mkdir()
        data = self.workdir / f"{tag}.lua"
        data.write_text(
            load.lua(self.args.seed, self.args.max_pages, latency_dir if measured else None)
        )
        url = f"{self.bases[load.server]}/graphql"
        server_pids = self.pids[load.server]
        ours = self.all_server_pids() + ([self.redis_pid] if self.redis_pid else [])
        await self.settle()
        pg0 = await self.postgres.snapshot()
        cpu0 = cpu_seconds(server_pids)
        ours0 = cpu_seconds(ours)
        redis0 = cpu_seconds([self.redis_pid]) if self.redis_pid else 0.0
        busy0, self0 = machine_busy(), time.process_time()
        run.loadavg = os.getloadavg()[0]
        spies = self.profile(load, seconds) if measured else []
        started = time.perf_counter()
        result, wrk_cpu = await asyncio.to_thread(
            run_wrk,
            self.wrk,
            url,
            data,
            self.args.connections,
            seconds,
            self.args.timeout,
            self.log,
        )
        elapsed = time.perf_counter() - started
        for spy in spies:
            spy.wait()
        run.server_cpu = cpu_seconds(server_pids) - cpu0
        run.redis_cpu = (cpu_seconds([self.redis_pid]) - redis0) if self.redis_pid else 0.0
        run.pg_cpu = pg_cpu_delta(pg0, await self.postgres.snapshot())
        run.wrk_cpu = wrk_cpu
        mine = cpu_seconds(ours) - ours0 + run.pg_cpu + wrk_cpu + time.process_time() - self0
        run.others_cores = max(0.0, (machine_busy() - busy0 - mine) / elapsed)
        run.wrk = result
        run.requests = int(result.get("requests") or 0)
        if measured:
            timings = read_timings(latency_dir, str(result.get("inflight_since_us") or ""), seconds)
            run.latencies, run.seconds, run.inflight = (
                timings.latencies,
                timings.seconds,
                timings.inflight,
            )
        return run


# -- report --------------------------------------------------------------------------------


def fmt(value: float, digits: int = 1) -> str:
    return "-" if value != value else f"{value:,.{digits}f}"  # NaN -> "-"


def table(
    runs: Sequence[Run], stock_rate: float, stock_cpu: float, anchor: dict[str, float]
) -> str:
    """stock_cpu: the ceiling's server + PG + Redis CPU ms per request, for "x stock, CPU":
    the req/s ratio the two would have if CPU were the only limit (less sensitive to the
    other work on the machine than the req/s ratio). anchor: the bare handler's next
    pages/s per viewer class (the stock rows: against the first class's)."""
    lines = [
        "| variant | viewers | pages/s | x stock | x anchor | x stock, CPU | p50 ms | p99 ms "
        "| server CPU ms/req | PG + Redis CPU ms/req | wrk CPU µs/req | non-200 | errors "
        "| degraded | other load (cores) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        bare = anchor.get(r.cls, next(iter(anchor.values()), 0.0))
        errors = r.counter("errors") + r.socket_errors + r.timeouts
        degraded = f"{r.counter('degraded')} ({fmt(100 * r.degraded_share, 2)}%)"
        p99, bounded = r.p99()
        lines.append(
            f"| {LABELS[r.key]}{r.label_suffix} | {CLASS_LABELS[r.cls]} | {fmt(r.rate, 0)} "
            f"| {fmt(r.rate / stock_rate, 2) if stock_rate else '-'} "
            f"| {fmt(r.rate / bare, 2) if bare else '-'} "
            f"| {fmt(stock_cpu / r.total_cpu_ms, 2) if r.total_cpu_ms else '-'} "
            f"| {fmt(r.pct(0.5))} | {'>= ' if bounded else ''}{fmt(p99)} "
            f"| {fmt(r.per_request_ms(r.server_cpu), 2)} "
            f"| {fmt(r.per_request_ms(r.pg_cpu + r.redis_cpu), 2)} "
            f"| {fmt(r.per_request_ms(r.wrk_cpu) * 1000, 0)} "
            f"| {r.counter('non200')} | {errors} | {degraded} | {fmt(r.others_cores, 2)} |"
        )
    return "\n".join(lines)


def targets(results: dict[tuple[str, str], Run], stock_rate: float, classes: Sequence[str]) -> str:
    lines = ["| target | measured | met |", "|---|---:|:-:|"]

    def row(text: str, measured: str, ok: bool) -> None:
        lines.append(f"| {text} | {measured} | {'yes' if ok else 'no'} |")

    for cls in classes:
        for key in FEED_VARIANTS:
            r = results.get((key, cls))
            if r is None or not stock_rate or key not in TARGET_RATIO:
                continue
            ratio = r.rate / stock_rate
            goal = TARGET_RATIO[key]
            row(
                f"{LABELS[key]}, {cls}: req/s >= {goal}x stock ceiling",
                f"{ratio:.2f}x ({r.rate:,.0f} / {stock_rate:,.0f})",
                ratio >= goal,
            )
    for cls in classes:
        r, bare = results.get(("next", cls)), results.get(("anchor", cls))
        if r is not None and bare is not None and bare.rate:
            ratio = r.rate / bare.rate
            row(
                f"{LABELS['next']}, {cls}: req/s >= {TARGET_ANCHOR}x the bare handler's",
                f"{ratio:.2f}x ({r.rate:,.0f} / {bare.rate:,.0f})",
                ratio >= TARGET_ANCHOR,
            )
    for cls in classes:
        r = results.get(("next", cls))
        if r is not None:
            row(
                f"feed next pages/s, {cls} >= {TARGET_NEXT_PER_S:,}",
                f"{r.rate:,.0f} ({r.rate / TARGET_NEXT_PER_S:.2f}x)",
                r.rate >= TARGET_NEXT_PER_S,
            )
    for cls in classes:
        for key in FEED_VARIANTS:
            r = results.get((key, cls))
            if r is not None:
                p99, bounded = r.p99()
                row(
                    f"{LABELS[key]}, {cls}: p99 <= {TARGET_P99_MS} ms",
                    f"{'>= ' if bounded else ''}{p99:,.0f} ms ({p99 / TARGET_P99_MS:.2f}x the "
                    "limit)",
                    p99 <= TARGET_P99_MS,
                )
    naive = results.get(("naive", "heavy"))
    for key in FEED_VARIANTS:
        r = results.get((key, "heavy"))
        if naive is not None and r is not None:
            # The naive join's p99 counts its dropped requests as lower bounds (so the ratio
            # is one too); the feed's p99 as measured (its drops only ever raise it).
            (slow, bounded), (fast, _) = naive.p99(), r.p99()
            ratio = slow / fast
            row(
                f"heavy: naive join p99 / {LABELS[key]} p99 >= {TARGET_NAIVE_P99:g}x",
                f"{'>= ' if bounded else ''}{ratio:.1f}x ({slow:,.0f} / {fast:,.0f} ms)",
                ratio >= TARGET_NAIVE_P99,
            )
    for cls in classes:
        for key in FEED_VARIANTS:
            r = results.get((key, cls))
            if r is not None:
                share = r.degraded_share
                row(
                    f"{LABELS[key]}, {cls}: degraded <= {TARGET_DEGRADED:.0%}",
                    f"{share:.2%} ({r.counter('degraded')} of {r.counter('responses')})",
                    share <= TARGET_DEGRADED,
                )
    return "\n".join(lines)


# -- main ----------------------------------------------------------------------------------


def as_text(document: str) -> str:
    """The document as an ad-hoc client sends it: the same query on one line, so not the
    registered text (GraphiQL's own formatting differs from it the same way)."""
    return " ".join(document.split())


def workloads(
    viewers: dict[str, list[int]], tokens: dict[int, str], classes: Sequence[str]
) -> list[Workload]:
    """Feed variants send the Feed document registered (by `documentId`) or as text
    (`as_text`); the anchor gets the registered body (it reads only the variables)."""
    kinds = variants()

    def body(key: str, after: str | None = None, how: str = "") -> str:
        data = orjson.loads(kinds[key].body(after=after))
        if how == "registered":
            data = {"documentId": document_id(data.pop("query")), **data}
        elif how == "text":
            data["query"] = as_text(data["query"])
        return orjson.dumps(data).decode()

    def cursor_body(how: str) -> tuple[str, str]:
        prefix, _, suffix = body("next", CURSOR_MARK, how).partition(CURSOR_MARK)
        return prefix, suffix

    reg, text = cursor_body("registered"), cursor_body("text")
    out = [
        Workload(
            "stock",
            "any",
            STOCK_APP,
            "first",
            [tokens[u] for u in viewers[classes[0]]],
            body("memory"),
        )
    ]
    for cls in classes:
        toks = [tokens[u] for u in viewers[cls]]
        ranked, chrono = body("ranked", how="registered"), body("chrono", how="registered")
        out += [
            Workload("anchor", cls, ANCHOR_APP, "next", toks, ranked, *reg),
            Workload("next", cls, API_APP, "next", toks, ranked, *reg),
            Workload("chrono", cls, API_APP, "first", toks, chrono),
            Workload("ranked", cls, API_APP, "first", toks, ranked),
            Workload("next-text", cls, API_APP, "next", toks, body("ranked", how="text"), *text),
            Workload("chrono-text", cls, API_APP, "first", toks, body("chrono", how="text")),
            Workload("ranked-text", cls, API_APP, "first", toks, body("ranked", how="text")),
            Workload("naive", cls, STOCK_APP, "first", toks, body("naive")),
        ]
    return out


async def warm_up(
    bases: dict[str, str],
    redis: Redis,
    headers: dict[int, dict[str, str]],
    everyone: Sequence[int],
) -> str:
    """feed_read's: every viewer's cold timeline is rebuilt (served from Postgres meanwhile),
    then every variant is read once per viewer."""
    kinds = variants()
    started = time.perf_counter()
    chrono = kinds["chrono"]
    replies = await each(
        bases[API_APP], chrono, [(headers[u], chrono.body()) for u in everyone], 10
    )
    cold = sum(check(r, "feed")[1] for r in replies)
    missing = await wait_for_timelines(redis, everyone)
    failures = 0
    for key in ("ranked", "chrono", "naive", "memory"):
        variant = kinds[key]
        replies = await each(
            bases[variant.server], variant, [(headers[u], variant.body()) for u in everyone], 10
        )
        failures += sum(not check(r, variant.top)[0] for r in replies)
    return (
        f"warm-up: {len(everyone)} viewers, {cold} cold reads served from Postgres while their "
        f"timelines were rebuilt, {missing} timelines still missing, {failures} failed "
        f"requests, {time.perf_counter() - started:.1f} s"
    )


async def run(args: argparse.Namespace, wrk: str) -> None:
    base_db = base_database_url()
    classes = [c for c in args.classes.split(",") if c]
    chosen = [v for v in args.variants.split(",") if v]
    name = args.reuse_db or f"bench_feed_{uuid.uuid4().hex[:6]}"
    dsn = create_database(base_db, name)
    owned = args.reuse_db is None and not args.keep
    workdir = Path(tempfile.mkdtemp(prefix="feed_wrk_"))
    log = workdir / "wrk.log"
    servers: dict[str, subprocess.Popen[bytes]] = {}
    redis_proc: subprocess.Popen[bytes] | None = None
    redis: Redis | None = None
    admin: asyncpg.Connection | None = None
    try:
        await ensure_seeded(dsn, name, args.users, args.avg_following, args.posts, args.seed)
        counts = await data_set(dsn)

        if args.redis_url:
            redis_url = scratch_redis_url(args.redis_url)
        else:
            redis_proc, redis_url = private_redis(workdir, workdir / "redis.log")
        redis = Redis.from_url(redis_url)
        await wait_for_redis(redis)
        await redis.flushdb()

        if is_loopback(base_db):
            admin = await asyncpg.connect(base_db)

        secret = secrets.token_urlsafe(48)
        settings = Settings(secret_key=secret)
        env = {**os.environ, "DATABASE_URL": dsn, "REDIS_URL": redis_url, "SECRET_KEY": secret}
        # Every client here is one loopback address: the per-IP read budget (meant for one
        # client among many) is off. The per-user budget stays counted (in process, flushed
        # to Redis in batches) with a limit no viewer reaches: the 12 heavy viewers each
        # read ~40 pages/s here, 2,400 a minute, past the default 1,200, and refused pages
        # (cheap errors) would inflate the rates.
        env.setdefault("RATE_LIMIT_READS_PER_IP_PER_MINUTE", "0")
        env.setdefault("RATE_LIMIT_READS_PER_MINUTE", "1000000")
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        bases: dict[str, str] = {}
        logs = {
            API_APP: workdir / "api.log",
            STOCK_APP: workdir / "stock.log",
            ANCHOR_APP: workdir / "anchor.log",
            BEFORE: workdir / "api-before.log",
        }
        envs = {API_APP: env, STOCK_APP: env, ANCHOR_APP: env}
        if before_label(args):  # the API again, as it was before a change (a setting off,
            # or another checkout's code: --before-root)
            pairs = (item.split("=", 1) for item in (args.before_env or "").split(",") if item)
            envs[BEFORE] = {**env, **dict(pairs)}
        for app_name, app_env in envs.items():
            port = free_port()
            module = app_name.split(" ")[0]
            root = Path(args.before_root) if app_name == BEFORE and args.before_root else None
            servers[app_name] = start_server(
                module, app_env, port, args.workers, logs[app_name], root or PROJECT_ROOT
            )
            bases[app_name] = f"http://127.0.0.1:{port}"
        for app_name in envs:
            await wait_ready(bases[app_name], servers[app_name], logs[app_name])
        await asyncio.sleep(1.0)  # --workers N: let every worker finish its startup
        pids = {a: process_tree(p.pid) for a, p in servers.items()}
        code = code_state()
        hubs = ""
        if redis_proc is not None:  # a private Redis: every pub/sub client is an API hub
            clients = await redis.execute_command("CLIENT", "LIST", "TYPE", "pubsub")
            text = clients.decode() if isinstance(clients, bytes) else str(clients)
            count = len([line for line in text.splitlines() if line.strip()])
            hubs = f"; realtime hubs: {count} pub/sub connection(s) for {args.workers} workers"
        bench = Bench(
            args,
            wrk,
            bases,
            pids,
            redis_proc.pid if redis_proc else None,
            Postgres(admin, name),
            workdir,
            log,
        )

        viewers = await pick_viewers(dsn, args.viewers, args.seed, settings.active_days)
        for cls in [c for c in classes if not viewers[c]]:
            print(f"no {cls} viewers in this data set: that class is skipped", flush=True)
            classes.remove(cls)
        everyone = sorted({u for cls in classes for u in viewers[cls]})
        tokens = {u: issue_token(settings, u) for u in everyone}
        headers = {
            u: {"authorization": f"Bearer {t}", "content-type": "application/json"}
            for u, t in tokens.items()
        }
        api_workers = [p for p in pids[API_APP] if p != servers[API_APP].pid and is_worker(p)]
        worker_cpu0 = {p: cpu_seconds([p]) for p in api_workers}
        print(await warm_up(bases, redis, headers, everyone), flush=True)

        loads = [w for w in workloads(viewers, tokens, classes) if w.key in (*chosen, "stock")]
        if before_label(args):
            before = [v for v in args.before_variants.split(",") if v]
            loads += [
                dataclasses.replace(w, server=BEFORE, label=f" (before: {before_label(args)})")
                for w in list(loads)
                if w.key in before and w.server == API_APP
            ]
        stock = loads[0]
        order = [stock, *loads[1:], stock]  # the ceiling first and last: drift shows
        results: dict[tuple[str, str], Run] = {}
        stock_runs: list[Run] = []
        before_runs: list[Run] = []
        load_start = os.getloadavg()
        for n, load in enumerate(order):
            if args.warmup > 0:
                await bench.wrk_run(load, args.warmup, measured=False)
            seconds = args.naive_seconds if load.key == "naive" else args.seconds
            r = await bench.wrk_run(load, seconds, measured=True)
            if load.key == "stock":
                r.label_suffix = ", first" if n == 0 else ", last"
                stock_runs.append(r)
            elif load.label:
                r.label_suffix = load.label
                before_runs.append(r)
            else:
                results[(load.key, load.cls)] = r
            print(
                f"{load.key:11} {load.cls:6}{load.label}: {r.rate:7.0f} pages/s  p50 {r.pct(0.5):7.1f} ms  "
                f"p99 {r.pct(0.99):7.1f} ms  non-200 {r.counter('non200')}  errors "
                f"{r.counter('errors')}  degraded {r.counter('degraded')}  server CPU "
                f"{r.per_request_ms(r.server_cpu):.2f} ms/req  other load "
                f"{r.others_cores:.2f} cores",
                flush=True,
            )
        load_end = os.getloadavg()
        worker_cpu = {p: cpu_seconds([p]) - c for p, c in worker_cpu0.items()}
        stock_rate = sum(r.rate for r in stock_runs) / len(stock_runs)
        stock_cpu = sum(r.total_cpu_ms for r in stock_runs) / len(stock_runs)

        others = [r.others_cores for r in (*stock_runs, *results.values())]
        print()
        print(
            f"Data set: {counts['users']:,} users, {counts['follows']:,} follows, "
            f"{counts['posts']:,} posts (database {name}). Servers: uvicorn {API_APP} and "
            f"{STOCK_APP}, {args.workers} workers each, uvloop + httptools; Redis "
            f"{'private redis-server' if redis_proc else redis_url}. Load: wrk "
            f"-t{args.connections} -c{args.connections}, {args.seconds} s per run after "
            f"{args.warmup} s of unmeasured warm-up; viewers: {len(viewers['random'])} random "
            f"active, {len(viewers['heavy'])} heavy; page size {PAGE}; next pages: up to "
            f"{args.max_pages} per session. {os.cpu_count()} CPUs shared by the servers, "
            f"Postgres, Redis, wrk and other work: load average {load_start[0]:.1f} at the "
            f"start, {load_end[0]:.1f} at the end; other work used "
            f"{min(others):.2f}-{max(others):.2f} cores during the runs."
        )
        print(code)
        print(
            "API workers' CPU over the runs: "
            + ", ".join(f"pid {p}: {c:.1f} s" for p, c in sorted(worker_cpu.items()))
            + hubs
        )
        print(
            f"Stock ceiling: {stock_runs[0].rate:,.0f} req/s first, {stock_runs[-1].rate:,.0f} "
            f"last, mean {stock_rate:,.0f} (the ratios' denominator)."
        )
        print()
        ordered = [stock_runs[0], *results.values(), *before_runs, stock_runs[-1]]
        anchor = {cls: r.rate for (key, cls), r in results.items() if key == "anchor"}
        print(table(ordered, stock_rate, stock_cpu, anchor))
        nxt = [r for r in results.values() if r.kind == "n"]
        for r in nxt:
            firsts = r.latencies.get("f", [])
            print(
                f"\nnext pages, {r.cls}: {r.pages:,} next pages and {len(firsts):,} first "
                f"pages that started {r.counter('sessions'):,} sessions (p99 "
                f"{fmt(percentile(firsts, 0.99))} ms); sessions ended by hasNextPage false: "
                f"{r.counter('session_ends')}, at {args.max_pages} pages: "
                f"{r.counter('capped')}; CURSOR_EXPIRED: {r.counter('expired')}. CPU per "
                "request counts both kinds."
            )
        print()
        print(targets(results, stock_rate, classes))
        print()
        for r in ordered:
            print(json.dumps(r.record(stock_rate)))
        print(f"\nlogs: {workdir}")
    finally:
        stop_processes(servers.values(), signal.SIGINT, timeout=15)
        if redis is not None:
            with contextlib.suppress(Exception):
                await redis.flushdb()
            await redis.aclose()
        stop_process(redis_proc)
        if admin is not None:
            await admin.close()
        release_database(base_db, name, owned)


def main(argv: Sequence[str] | None = None) -> None:
    parser = seeded_parser(__doc__, users=100_000, avg_following=50, posts=2_000_000)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--seconds", type=int, default=10, help="measured seconds per run")
    parser.add_argument(
        "--naive-seconds",
        type=int,
        default=20,
        help="measured seconds of the naive join's runs (its heavy answers take seconds)",
    )
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured wrk seconds per run")
    parser.add_argument("--timeout", type=int, default=30, help="wrk's request timeout, s")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--viewers", type=int, default=200, help="random active viewers")
    parser.add_argument("--max-pages", type=int, default=25, help="pages per session")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--before-env",
        metavar="KEY=VALUE,...",
        help="also start the API with these settings and run --before-variants on it too "
        "(same run: before and after a change that a setting turns off)",
    )
    parser.add_argument(
        "--before-root",
        help="run the before server from this checkout (e.g. a worktree of the baseline "
        "commit: `git worktree add /tmp/base <rev>`), with --before-env if given",
    )
    parser.add_argument("--before-variants", default="next-text,chrono-text,ranked-text")
    parser.add_argument("--classes", default=",".join(CLASSES))
    parser.add_argument("--redis-url", help="use this Redis db (FLUSHED) instead of a private one")
    parser.add_argument(
        "--profile", metavar="KEY[:CLASS],...", help="py-spy the API workers in those runs"
    )
    args = parser.parse_args(argv)
    wrk = shutil.which("wrk")
    if wrk is None:
        print(f"wrk is not installed; install it with: {INSTALL_HINT}", file=sys.stderr)
        raise SystemExit(2)
    asyncio.run(run(args, wrk))


if __name__ == "__main__":
    main()
