"""Feed pages with 1 API process next to 2, back to back on the same data (issue 23).

    python -m benchmarks.scaleout_api [--users 20000 --avg-following 30 --posts 300000]
        [--variants next,chrono,ranked] [--classes random] [--seconds 10] [--rounds 1]

A wrapper around benchmarks/feed_wrk.py (which another issue owns): it runs feed_wrk once
with `--workers 1` and once with `--workers 2` (uvicorn worker processes of app.web, each a
whole API process with its own pools), on one seeded database (`--reuse-db`, seeded by the
first run only, dropped at the end unless --keep), and prints pages/s and p99 per variant
side by side with the 2/1 ratios. `--rounds N` repeats the pair (1, 2, 1, 2, ...) so drift
of the shared machine's load shows. The data set is smaller than feed_wrk's defaults (100k
users, 2M posts) so the pair finishes in about ten minutes; say so next to the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from devtools.provision import drop_database


def run_once(workers: int, args: argparse.Namespace, db: str) -> list[dict[str, Any]]:
    """One feed_wrk run with `workers` API processes; its JSON records."""
    argv = [
        sys.executable,
        "-m",
        "benchmarks.feed_wrk",
        "--workers",
        str(workers),
        "--reuse-db",
        db,
        "--users",
        str(args.users),
        "--avg-following",
        str(args.avg_following),
        "--posts",
        str(args.posts),
        "--variants",
        args.variants,
        "--classes",
        args.classes,
        "--seconds",
        str(args.seconds),
        "--warmup",
        str(args.warmup),
        "--connections",
        str(args.connections),
        "--viewers",
        str(args.viewers),
    ]
    print(f"== {workers} API process(es): {' '.join(argv[1:])}", flush=True)
    done = subprocess.run(argv, capture_output=True, text=True, env=os.environ.copy())
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"feed_wrk --workers {workers} failed ({done.returncode})")
    records = []
    for line in done.stdout.splitlines():
        if line.startswith("{") and '"variant"' in line:
            records.append(json.loads(line))
    return records


def summarize(runs: list[tuple[int, list[dict[str, Any]]]]) -> None:
    """The side-by-side table: per variant and viewer class, pages/s and p99 per process
    count (the mean over rounds), then the 2/1 ratios."""
    table: dict[tuple[str, str], dict[int, list[dict[str, Any]]]] = {}
    for workers, records in runs:
        for r in records:
            table.setdefault((r["variant"], r["viewers"]), {}).setdefault(workers, []).append(r)
    print(
        "\n| variant | viewers | 1 proc pages/s | 2 proc pages/s | ratio | 1 proc p99 ms "
        "| 2 proc p99 ms | errors (1/2) |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for (variant, viewers), by in table.items():
        if 1 not in by or 2 not in by:
            continue

        def mean(key: str, rs: list[dict[str, Any]]) -> float:
            return sum(float(r[key]) for r in rs) / len(rs)

        rate1, rate2 = mean("pages_per_s", by[1]), mean("pages_per_s", by[2])
        p1, p2 = mean("p99_ms", by[1]), mean("p99_ms", by[2])
        errs = [sum(r["non200"] + r["graphql_errors"] for r in by[w]) for w in (1, 2)]
        ratio = rate2 / rate1 if rate1 else float("nan")
        print(
            f"| {variant} | {viewers} | {rate1:.0f} | {rate2:.0f} | {ratio:.2f} | {p1:.1f} "
            f"| {p2:.1f} | {errs[0]}/{errs[1]} |"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--avg-following", type=float, default=30)
    parser.add_argument("--posts", type=int, default=300_000)
    parser.add_argument("--variants", default="next,chrono,ranked")
    parser.add_argument("--classes", default="random")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--viewers", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the seeded database")
    args = parser.parse_args(argv)
    db = f"bench_scaleout_{uuid.uuid4().hex[:8]}"
    runs: list[tuple[int, list[dict[str, Any]]]] = []
    try:
        for _ in range(args.rounds):
            for workers in (1, 2):
                runs.append((workers, run_once(workers, args, db)))
    finally:
        if not args.keep:
            base = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
            drop_database(base, db)
    summarize(runs)


if __name__ == "__main__":
    main()
