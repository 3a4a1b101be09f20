"""python -m benchmarks.report [--scale small|medium|large] [--reuse] [--out DIR]
    [--only compare,burst,sweep,limits] [--users N --avg-following F ...]

Exit status 1 when a correctness check failed (tests/benchmarks runs the small scale)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.config import PROJECT_ROOT
from benchmarks.report import generate, limits, render, scenarios
from benchmarks.report.scales import SCALES, scale_named
from benchmarks.report.system import Client, System, scratch_name

ALL = ("limits", "compare", "burst", "curves", "sweep")


def machine() -> str:
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    load = os.getloadavg()[0]
    return (f"{platform.machine()}, {os.cpu_count()} cores{mem}, Python "
            f"{platform.python_version()}, load average {load:.1f} at the start")  # fmt: skip


async def run(args: argparse.Namespace) -> dict[str, Any]:
    scale = scale_named(args.scale, users=args.users, avg_following=args.avg_following,
                        celebrity=args.celebrity, stream_posts=args.stream_posts)  # fmt: skip
    started = time.time()
    system = System(scratch_name(scale.name, args.reuse), keep_database=args.reuse)
    results: dict[str, Any] = {}
    ok = False
    try:
        await system.open()
        if args.reuse and await generate.existing(system.dsn, scale):
            gen = "reused (--reuse: generated earlier with the same parameters)"
        else:
            if not system.created_database:  # a kept database of other parameters
                from devtools.provision import drop_database

                print("[report] the kept network differs: regenerating", flush=True)
                drop_database(system.base_db, system.database)
                from devtools.provision import create_database, migrate

                system.dsn = create_database(system.base_db, system.database)
                migrate(system.dsn)
            phases = await generate.generate(system.dsn, scale)
            gen = (f"COPY in {phases['total']:.0f} s (graph {phases['graph']:.0f} s, follows "
                   f"{phases['follows_copy']:.0f} s, indexes {phases['follows_indexes']:.0f} s)")  # fmt: skip
        system.start("relay")
        system.start("stock")
        system.start("api")
        await system.wait_http(system.stock)
        await system.wait_http(system.base)
        w = await scenarios.world(system, scale)
        client = Client(system.base)
        import asyncpg

        conn = await asyncpg.connect(system.dsn)
        follows = await conn.fetchval("SELECT count(*) FROM follows")
        await conn.close()
        only = args.only.split(",") if args.only else list(ALL)
        results["meta"] = {
            "scale": scale.name,
            "command": "python -m benchmarks.report " + shlex.join(sys.argv[1:]),
            "started": datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d %H:%M"),
            "machine": machine(),
            "users": scale.users,
            "follows": follows,
            "active_users": len(w.active),
            "zipf_exponent": scale.zipf_exponent,
            "celebrity": w.follower_counts.get(1, 0),
            "big": w.follower_counts.get(2, 0),
            "ladder": ", ".join(f"{n:,}" for n in scale.ladder),
            "generation": gen,
            "stream": (f"{scale.stream_posts} ordinary posts by random active authors with "
                       f"followers plus {scale.stream_celebrity_posts} celebrity posts, spread "
                       f"over {scale.stream_seconds:g} s"),
            "burst": (f"The celebrity posts {scale.burst_posts} times, every "
                      f"{scale.burst_every:g} s, while ordinary authors post "
                      f"{scale.burst_ordinary_rate:g} posts/s"),
            "sweep_posts": scale.sweep_posts,
        }  # fmt: skip
        partial = args.out / f"report-{scale.name}.partial.json"
        args.out.mkdir(parents=True, exist_ok=True)

        def keep() -> None:  # a crash later still leaves what was measured
            partial.write_text(json.dumps(results, indent=1, default=str))

        if "limits" in only:
            print(f"[report] {time.time() - started:.0f} s: raw limits", flush=True)
            results["limits"] = await limits.measure(system, client)
            keep()
        if "compare" in only:
            keys = ["push", "hybrid", "control", "pull"]
            results["compare"] = await scenarios.compare(system, client, w, keys)
            keep()
        if "burst" in only:
            results["burst"] = await scenarios.burst(system, client, w, list(scale.burst_variants))
            keep()
        if "curves" in only:
            results["curves"] = await scenarios.curves(system, client, w)
            keep()
        if "sweep" in only:
            results["sweep"] = await scenarios.sweep(system, client, w)
        partial.unlink(missing_ok=True)
        await client.aclose()
        problems = []
        for section in ("burst", "sweep"):
            for k, r in (results.get(section) or {}).items():
                problems += [f"{section} {k}: {p}" for p in r.get("problems", [])]
        for k, r in (results.get("curves") or {}).items():
            problems += [f"curves {k}: {p}" for p in r.get("problems", [])]
        for k, r in ((results.get("compare") or {}).get("strategies") or {}).items():
            problems += [f"compare {k}: {p}" for p in r.get("problems", [])]
        results["problems"] = problems
        ok = not problems
    finally:
        results.setdefault("meta", {})["seconds"] = time.time() - started
        await system.close(keep_logs=not ok)
        if not ok:
            print(f"[report] logs kept in {system.workdir}", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the generated network (database bench_report_<scale>) for "
                             "the next run, and use it if it is there")  # fmt: skip
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "benchmarks")
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(ALL)}")
    parser.add_argument("--users", type=int)
    parser.add_argument("--avg-following", type=float)
    parser.add_argument("--celebrity", type=int)
    parser.add_argument("--stream-posts", type=int)
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="only write the report and charts from a run's results")  # fmt: skip
    args = parser.parse_args(argv)
    if args.render:
        results = json.loads(args.render.read_text())
        return _write(results, args.out)
    # SIGTERM as Ctrl-C: the processes and servers of the run are stopped on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    embedded: frozenset[str] = frozenset()
    if not os.environ.get("DATABASE_URL"):
        # As `make test`: the embedded PostgreSQL (devtools.provision) when none is given.
        from devtools import provision

        os.environ.update(provision.ensure_services())
        embedded = provision.started_services()
    try:
        results = asyncio.run(run(args))
    finally:
        if embedded:
            from devtools import provision

            provision.stop_services(embedded)
    return _write(results, args.out)


def _write(results: dict[str, Any], out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    prefix = results["meta"]["scale"]
    (out / f"report-{prefix}.json").write_text(json.dumps(results, indent=1, default=str))
    images = render.charts(results, out, prefix)
    (out / f"report-{prefix}.md").write_text(render.markdown(results, images))
    print(f"[report] {out / f'report-{prefix}.md'}")
    if results.get("problems"):
        print("[report] CHECK FAILED:\n  " + "\n  ".join(results["problems"][:20]))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
