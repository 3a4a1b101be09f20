"""GraphQL execution cost of a feed page, fast executor against graphql-core's, in one process
and one run (issue 10, "A fast execution path").

    python -m benchmarks.execution [--users 20000 --avg-following 60 --posts 400000]
        [--requests 200] [--rounds 7] [--viewers 50] [--variants execution,bound,next,chrono]
        [--reuse-db NAME] [--keep]

What it does:
1. Database: a scratch database on DATABASE_URL's server (default the local postgres),
   migrated and filled by devtools.seed's seed_bulk; `--reuse-db NAME` seeds NAME only if it
   is empty and never drops it. Redis: a private `redis-server` on a free port (no
   persistence), stopped at the end, so that no other work's Redis db is flushed and no test
   run flushes this one (`--redis-url URL` names a scratch db instead: it gets FLUSHED).
2. In this process: the app's composition root (app.state) and two schemas from
   app.api.endpoint.schema.build_schema, one with `fast_execution=True` (app.api.fast.executor), one with
   False (graphql-core's executor). Requests are `schema.execute` of the Feed document of
   graphql/operations/feed.graphql (20 posts), with a fresh request Context each, and their
   answer encoded as the HTTP view does (strawberry's process_result, orjson): no HTTP.
3. Viewers: `--viewers` active users following >= 50 accounts; a warm-up reads every viewer's
   feed until their timelines exist in Redis.
4. Variants, each run as `--rounds` rounds of `--requests` requests per executor (the two
   alternate within a round, so drift hits both alike):
     execution  the page's data replayed: FeedService.page returns a page read once per viewer
                beforehand, so only the resolver mapping, GraphQL execution and encoding run
                (what the executor changes, and nothing else)
     next       feed(first: 20, after: <a RANKED first page's endCursor>): real reads of a
                session page (Redis + Postgres), as a scrolling client does
     chrono     feed(first: 20, mode: CHRONOLOGICAL): real first-page reads
   Process CPU (time.process_time) per request, median over rounds; the ratio plain / fast.
   The execution variant also checks that both executors answer the same bytes.
5. `bound`: with the page data replayed, the fast executor on the Feed document against the
   same document with every post cut to `id viewerHasLiked`. The difference is all a cache
   of posts' viewer-independent sub-results could ever save on top of the fast executor
   (a reused sub-result still costs its key and a copy): the case for or against one.

CPU is this process's only: Postgres and Redis run elsewhere. The machine is shared: compare
the two columns of one run, not figures across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import orjson
from redis.asyncio import Redis
from strawberry.http import process_result

from benchmarks.common import (
    base_database_url,
    private_redis,
    release_database,
    scratch_redis_url,
    seeded_parser,
    stop_process,
    wait_for_redis,
)
from benchmarks.feed_read import ensure_seeded
from devtools.provision import create_database

PAGE = 20
EXECUTORS = ("fast", "plain")
# The Feed document with each post cut to its viewer-dependent field and id: what serving
# every post's viewer-independent part from a cache would leave to execute (the "bound").
REDUCED = """
query Feed($first: Int = 20, $after: String, $mode: FeedMode = RANKED) {
  feed(first: $first, after: $after, mode: $mode) {
    edges { cursor node { id viewerHasLiked } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    sessionId
    degraded
  }
}
"""


async def _viewers(dsn: str, n: int, seed: int) -> list[int]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT id FROM users WHERE following_count >= 50 "
            "AND last_active_at >= now() - interval '30 days' ORDER BY id"
        )
    finally:
        await conn.close()
    ids = [r[0] for r in rows]
    return random.Random(seed).sample(ids, min(n, len(ids)))


def _leaves(value: Any) -> int:
    """Fields in an answer: every key of every object."""
    if isinstance(value, dict):
        return sum(1 + _leaves(v) for v in value.values())
    if isinstance(value, list):
        return sum(_leaves(v) for v in value)
    return 0


class Bench:
    def __init__(self, state: Any, schemas: dict[str, Any], document: str) -> None:
        from app.api.schema.context import Context

        self.state = state
        self.schemas = schemas
        self.document = document
        self.context = Context

    async def request(
        self, executor: str, viewer: int, variables: dict[str, Any], document: str | None = None
    ) -> bytes:
        context = self.context(state=self.state, request=None, viewer_id=viewer)
        result = await self.schemas[executor].execute(
            document or self.document,
            variable_values=variables,
            context_value=context,
            operation_name="Feed",
        )
        body = orjson.dumps(process_result(result))
        if result.errors:
            raise RuntimeError(body.decode()[:500])
        return body


Request = Callable[[str, int], Awaitable[bytes]]


async def measure(
    name: str,
    request: Request,
    viewers: list[int],
    requests: int,
    rounds: int,
    quiet: bool = False,
) -> dict[str, list[float]]:
    """CPU ms per request of each executor, one figure per round."""
    cpu: dict[str, list[float]] = {e: [] for e in EXECUTORS}
    wall: dict[str, list[float]] = {e: [] for e in EXECUTORS}
    for executor in EXECUTORS:  # warm both (imports, caches, plans)
        for viewer in viewers[:5]:
            await request(executor, viewer)
    for round_no in range(rounds):
        order = EXECUTORS if round_no % 2 == 0 else EXECUTORS[::-1]
        for executor in order:
            started_cpu, started = time.process_time(), time.perf_counter()
            for i in range(requests):
                await request(executor, viewers[i % len(viewers)])
            cpu[executor].append((time.process_time() - started_cpu) * 1000 / requests)
            wall[executor].append((time.perf_counter() - started) * 1000 / requests)
    fast, plain = statistics.median(cpu["fast"]), statistics.median(cpu["plain"])
    if quiet:
        return cpu
    print(
        f"| {name} | {plain:.3f} | {fast:.3f} | {plain - fast:.3f} | {plain / fast:.2f}x "
        f"| {statistics.median(wall['plain']):.3f} | {statistics.median(wall['fast']):.3f} |",
        flush=True,
    )
    return cpu


async def run(args: argparse.Namespace) -> None:
    base_db = base_database_url()
    workdir = Path(tempfile.mkdtemp(prefix="bench_exec_"))
    redis_proc = None
    if args.redis_url:
        redis_url = scratch_redis_url(args.redis_url)
    else:
        redis_proc, redis_url = private_redis(workdir)
    name = args.reuse_db or f"bench_exec_{uuid.uuid4().hex[:6]}"
    dsn = create_database(base_db, name)
    owned = args.reuse_db is None and not args.keep
    # Settings are read once per process: point them at the scratch servers first.
    os.environ.update({"DATABASE_URL": dsn, "REDIS_URL": redis_url})
    os.environ.setdefault("SECRET_KEY", "bench-execution-secret-key-long-enough-for-hs256")
    redis = Redis.from_url(redis_url)
    state = None
    try:
        await wait_for_redis(redis)  # a private server: until it answers
        await ensure_seeded(dsn, name, args.users, args.avg_following, args.posts, args.seed)
        await redis.flushdb()

        from app.api.endpoint.schema import build_schema
        from app.config import get_settings
        from app.operation_documents import operations
        from app.state import create_state
        from app.timelines.store import timeline_key

        get_settings.cache_clear()
        state = create_state(get_settings())
        schemas = {
            "fast": build_schema(get_settings(), fast_execution=True),
            "plain": build_schema(get_settings(), fast_execution=False),
        }
        bench = Bench(state, schemas, operations()["Feed"])
        viewers = await _viewers(dsn, args.viewers, args.seed)
        if not viewers:
            raise SystemExit("no active viewer follows >= 50 accounts: seed more follows")

        # Warm-up: cold timelines are rebuilt from Postgres by the first reads.
        chrono = {"first": PAGE, "mode": "CHRONOLOGICAL"}
        for _ in range(100):
            for viewer in viewers:
                await bench.request("plain", viewer, chrono)
            if all([await redis.exists(timeline_key(v)) for v in viewers]):
                break
            await asyncio.sleep(0.1)

        # A recorded page per viewer (RANKED first page), replayed by the execution variant;
        # its end cursor opens the next-page variant.
        feed = state.feed
        real_page = feed.page
        recorded: dict[int, Any] = {}
        cursors: dict[int, str] = {}
        for viewer in viewers:
            recorded[viewer] = await real_page(viewer, _ranked(), PAGE, None)

        async def replayed(viewer_id: int, *_: Any) -> Any:
            return recorded[viewer_id]

        answers: dict[str, dict[int, bytes]] = {e: {} for e in EXECUTORS}
        feed.page = replayed  # type: ignore[method-assign]
        try:
            for executor in EXECUTORS:
                for viewer in viewers:
                    answers[executor][viewer] = await bench.request(
                        executor, viewer, {"first": PAGE}
                    )
        finally:
            del feed.page  # back to the class's method
        for viewer in viewers:  # the recorded page's session is the viewer's latest
            page_info = orjson.loads(answers["plain"][viewer])["data"]["feed"]["pageInfo"]
            cursors[viewer] = page_info["endCursor"]
        same = all(answers["fast"][v] == answers["plain"][v] for v in viewers)
        fields = statistics.mean(_leaves(orjson.loads(a)) for a in answers["plain"].values())
        posts = statistics.mean(
            len(orjson.loads(a)["data"]["feed"]["edges"]) for a in answers["plain"].values()
        )

        print(
            f"\n{len(viewers)} viewers, {posts:.1f} posts and {fields:.0f} fields per page, "
            f"{args.requests} requests x {args.rounds} rounds per executor and variant; "
            f"same bytes from both executors: {same}\n",
            flush=True,
        )
        print(
            "| variant | plain CPU ms/req | fast CPU ms/req | saved ms/req | plain / fast "
            "| plain wall ms/req | fast wall ms/req |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        cpu: dict[str, dict[str, list[float]]] = {}
        if "execution" in args.variants:
            feed.page = replayed  # type: ignore[method-assign]
            try:
                cpu["execution"] = await measure(
                    "execution (page data replayed)",
                    lambda e, v: bench.request(e, v, {"first": PAGE}),
                    viewers,
                    args.requests,
                    args.rounds,
                )
            finally:
                del feed.page
        if "next" in args.variants:
            cpu["next"] = await measure(
                "next page (session cursor), real reads",
                lambda e, v: bench.request(e, v, {"first": PAGE, "after": cursors[v]}),
                viewers,
                args.requests,
                args.rounds,
            )
        if "chrono" in args.variants:
            cpu["chrono"] = await measure(
                "CHRONOLOGICAL first page, real reads",
                lambda e, v: bench.request(e, v, chrono),
                viewers,
                args.requests,
                args.rounds,
            )
        if "bound" in args.variants:
            # "plain" here is the fast executor on the whole Feed document, "fast" the same
            # with each post reduced to what a reused sub-result would still need.
            feed.page = replayed  # type: ignore[method-assign]
            try:
                bound = await measure(
                    "bound",
                    lambda e, v: bench.request(
                        "fast", v, {"first": PAGE}, None if e == "plain" else REDUCED
                    ),
                    viewers,
                    args.requests,
                    args.rounds,
                    quiet=True,
                )
            finally:
                del feed.page
            whole, reduced = statistics.median(bound["plain"]), statistics.median(bound["fast"])
            print(
                f"\nreuse bound (fast executor, page data replayed): the Feed document "
                f"{whole:.3f} ms/req, with each post reduced to `id viewerHasLiked` "
                f"{reduced:.3f} ms/req: reusing posts' sub-results could save at most "
                f"{whole - reduced:.3f} ms/req ({(whole - reduced) / whole:.0%})"
            )
        if "execution" in cpu:
            saved = statistics.median(cpu["execution"]["plain"]) - statistics.median(
                cpu["execution"]["fast"]
            )
            print(
                f"\nexecution variant: {saved * 1000 / fields:.2f} us saved per field "
                f"({fields:.0f} fields per page)"
            )
        if not same:
            raise SystemExit("the executors answered different bytes")
    finally:
        if state is not None:
            await state.close()
        await redis.flushdb()
        await redis.aclose()
        stop_process(redis_proc)
        shutil.rmtree(workdir, ignore_errors=True)
        release_database(base_db, name, owned)


def _ranked() -> Any:
    from app.feed.modes import FeedMode

    return FeedMode.RANKED


def main(argv: Sequence[str] | None = None) -> None:
    parser = seeded_parser(__doc__, users=20_000, avg_following=60, posts=400_000)
    parser.add_argument("--viewers", type=int, default=50)
    parser.add_argument("--requests", type=int, default=200, help="per executor and round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--variants", default="execution,bound,next,chrono")
    parser.add_argument(
        "--redis-url", help="a scratch Redis db (FLUSHED); default: a private server"
    )
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
