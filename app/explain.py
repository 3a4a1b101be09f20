"""`python -m app.explain <handle> [--top 20] [--json]`: why a viewer's RANKED feed is in its
order (app.feed.explain has the report). A command-line root like app.web: it builds the
service's state on DATABASE_URL/REDIS_URL, reads, and writes nothing."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from app.config import get_settings
from app.feed.explain import DEFAULT_TOP, explain, render
from app.state import create_state


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app.explain", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("handle")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP)
    parser.add_argument("--json", action="store_true", help="one JSON object")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    async def go() -> dict[str, Any]:
        state = create_state(get_settings(), pool_size=2)
        try:
            return await explain(state.feed, state.sessions, args.handle, args.top)
        finally:
            await state.close()

    try:
        report = asyncio.run(go())
    except LookupError as exc:
        print(str(exc).strip("'\""), file=sys.stderr)
        return 1
    print(json.dumps(report) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
