"""A registered next page's CPU in process: the compiled Feed document's `execute` (the
root field's FeedService page, the connection, the plan's render), no HTTP, one page at a
time, so the figure is what a next page costs this process whatever else runs.

    python -m benchmarks.next_page_cpu --db NAME [--redis-url URL] [--pages 400]
        [--rounds 3] [--classes heavy,random] [--profile FILE]

NAME: a database seeded as feed_wrk seeds it (`--reuse-db NAME` there). URL: a Redis db of
its own (default redis://127.0.0.1:6415/2, a private redis-server; FLUSHED at the start).
Viewers as feed_wrk picks them (benchmarks.feed_read.pick_viewers: --viewers random active
users, "heavy" every user following 1,000-2,000 accounts). Each viewer's timeline is
rebuilt first (not measured). Then per round and class: --pages next pages as feed_wrk's
`next` variant asks them (a RANKED first page, then `after: endCursor` while hasNextPage,
a new first page past the end; the first pages are not counted), the viewers in turn, and
the process's CPU time (time.process_time) per next page. `--profile FILE`: cProfile of the
measured rounds' next pages into FILE (pstats), the first pages left out.

Made to compare two trees back to back: run it from each in turn (`cd TREE && python -m
benchmarks.next_page_cpu ...`, the same venv), a few times, and compare the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any


async def run(args: argparse.Namespace) -> None:
    base = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    dsn = base.rsplit("/", 1)[0] + "/" + args.db
    os.environ["DATABASE_URL"] = dsn
    os.environ["REDIS_URL"] = args.redis_url
    from app.api.endpoint.schema import build_schema
    from app.api.fast.compiler import compile_documents
    from app.api.schema.context import Context
    from app.api.upstream.strawberry import graphql_schema
    from app.config import Settings
    from app.state import create_state
    from benchmarks.feed_read import pick_viewers

    settings = Settings()
    schema = build_schema(settings)
    text, entry = next((t, e) for t, e in schema.documents.by_text().items() if e.name == "Feed")
    plan = compile_documents(graphql_schema(schema), {text: entry}, schema.process_errors)[text]
    state = create_state(settings, pool_size=4)
    viewers = await pick_viewers(dsn, args.viewers, args.seed, settings.active_days)
    classes = [c for c in args.classes.split(",") if c and viewers[c]]
    await state.redis.flushdb()
    cursors: dict[int, str | None] = {}
    profile = cProfile.Profile() if args.profile else None

    async def next_page(viewer: int, measure: bool) -> float:
        """One next page of `viewer`'s scroll (after first pages as needed): its CPU seconds."""
        while True:
            after = cursors.get(viewer)
            ctx = Context(state=state, request=None, viewer_id=viewer)
            values: dict[str, Any] = {"first": 20, "mode": "RANKED"}
            if after is not None:
                values["after"] = after
            if after is not None and profile is not None and measure:
                profile.enable()
            values = {k: plan.variables[k].coerce(v) for k, v in values.items()}
            started = time.process_time()
            body = await plan.execute(ctx, values)
            spent = time.process_time() - started
            if profile is not None:
                profile.disable()
            feed = (body.get("data") or {}).get("feed")
            if body.get("errors") and after is None:
                raise RuntimeError(f"a first page failed: {body['errors']}")
            info = feed["pageInfo"] if feed else None
            cursors[viewer] = info["endCursor"] if info and info["hasNextPage"] else None
            if after is not None and feed is not None:
                return spent

    try:
        everyone = [v for c in classes for v in viewers[c]]
        for _ in range(2):  # timelines rebuilt, sessions opened, then as in steady state
            for viewer in everyone:
                await next_page(viewer, False)
            await asyncio.sleep(1.0)
        results: dict[str, list[float]] = {}
        for r in range(args.rounds):
            for cls in classes:
                ids = viewers[cls]
                total = 0.0
                for i in range(args.pages):
                    total += await next_page(ids[i % len(ids)], True)
                per_page = total / args.pages * 1e6
                results.setdefault(cls, []).append(per_page)
                print(f"round {r + 1} {cls:7} {per_page:7.0f} us CPU per next page", flush=True)
        for cls, figures in results.items():
            print(f"median {cls:7} {statistics.median(figures):7.0f} us CPU per next page")
        if profile is not None:
            profile.dump_stats(args.profile)
    finally:
        await state.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6415/2")
    parser.add_argument("--pages", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--viewers", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--classes", default="heavy,random")
    parser.add_argument("--profile", default="")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
