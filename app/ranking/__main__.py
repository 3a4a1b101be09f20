"""Operators' and trainers' view of the ranking, on the PostgreSQL that DATABASE_URL names.

    python -m app.ranking export --since <ISO date or 7d> [--until ...] --out <file.parquet>
        the engagement log of the period as Parquet (streamed in batches: any period fits
        in memory), for offline training;
    python -m app.ranking report [--since 7d] [--until ...]
        per model version and experiment arm: impressions, engagements per impression with
        its 95% (Wilson) interval, duplicate and empty-page rates, p99 page cost.

Why one viewer's feed is in its order is `python -m app.explain <handle>` (it runs the read
path, so it lives above it: app/explain.py).

A subcommand is a parser added in `build_parser` and its coroutine in `COMMANDS`
(`args`, the settings -> exit status). docs/operations.md ("The engagement log") has more.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.config import Settings, get_settings
from app.db.engine import make_engine
from app.engagement.export import export
from app.engagement.periods import BadPeriod, parse_when
from app.engagement.pg import driver
from app.engagement.report import render, report


def _period(args: argparse.Namespace) -> tuple[datetime, datetime]:
    now = datetime.now(UTC)
    until = parse_when(args.until, now) if args.until else now
    return parse_when(args.since, now), until


async def run_export(args: argparse.Namespace, settings: Settings) -> int:
    since, until = _period(args)
    engine = make_engine(settings, pool_size=1)
    try:
        async with driver(engine) as conn:
            done = await export(conn, since, until, Path(args.out))
    finally:
        await engine.dispose()
    print(
        f"{done.rows} events ({done.batches} batches) from {since:%Y-%m-%d %H:%M} to "
        f"{until:%Y-%m-%d %H:%M} UTC written to {args.out}"
    )
    return 0


async def run_report(args: argparse.Namespace, settings: Settings) -> int:
    since, until = _period(args)
    engine = make_engine(settings, pool_size=1)
    try:
        async with driver(engine) as conn:
            figures = await report(conn, since, until)
    finally:
        await engine.dispose()
    print(render(figures, since, until))
    return 0


Command = Callable[[argparse.Namespace, Settings], Coroutine[Any, Any, int]]
COMMANDS: dict[str, Command] = {"export": run_export, "report": run_report}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app.ranking", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    out = commands.add_parser("export", help="the engagement log as Parquet")
    out.add_argument("--since", required=True, help="an ISO date/time (UTC) or a span: 7d, 12h")
    out.add_argument("--until", help="as --since (default: now)")
    out.add_argument("--out", required=True, help="the Parquet file to write")
    rep = commands.add_parser("report", help="per model version and arm figures")
    rep.add_argument("--since", default="7d", help="an ISO date/time (UTC) or a span (7d)")
    rep.add_argument("--until", help="as --since (default: now)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return asyncio.run(COMMANDS[args.command](args, get_settings()))
    except BadPeriod as exc:  # a bad --since/--until: usage, exit status 2
        parser.error(str(exc))


if __name__ == "__main__":
    sys.exit(main())
