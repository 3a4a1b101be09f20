"""Feed pages with images on the compiled fast path: CPU per page, latency and SQL queries per
page for viewers whose feed posts carry 0 images vs 4 images each, in one run (issue 36).

    python -m benchmarks.media_pages [--rounds 4] [--seconds 8] [--connections 8]
        [--workers 1] [--authors 30] [--posts-per-author 40] [--viewers 40]

What it does:
1. A scratch database (dropped at the end) and a private redis-server (benchmarks.common),
   seeded directly (no uploads): two sets of the same size, "0" and "4", each --authors
   authors with --posts-per-author posts (half PUBLIC, half FOLLOWERS) and --viewers
   viewers following all of their set's authors. Every post of set "4" has 4 images:
   post_media rows, each over a media_objects row of its own whose object (a real small
   JPEG or PNG, keyed as app.media keys it) is written to a local store (MEDIA_STORE=local,
   a scratch directory). Set "0" has the same rows without post_media.
2. The API, `uvicorn app.web:app --workers N` (benchmarks.common.start_server). The document:
   the registered Feed with `media { url width height contentType alt }` in its posts
   (sent by documentId when the registry holds it, else as a text, which the engine plans
   on its second sighting), CHRONOLOGICAL first pages of 20 posts.
3. Queries per page, counted for real: the same app built in this process on the same
   database (app.web.create_app over httpx's ASGI transport), the SQLAlchemy engine's
   `before_cursor_execute` events during --count-pages pages per set (every statement:
   app.feed.reads announces its asyncpg reads there too); and that every page was answered
   by the compiled path (graphql_compiled_total) with the set's number of images.
4. Load: wrk with benchmarks/wrk/feed.lua ("first" mode, one connection per thread), the
   sets alternated (0, 4, 4, 0, ...) for --rounds x 2 runs of --seconds each after a
   warm-up run of each: CPU of the uvicorn process tree and of this database's PostgreSQL
   backends per page, p50/p99 from the script's own per-request timings.
Prints a table, the ratio of CPU per page 4 vs 0 images (target <= 1.10) and a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import orjson

from app.config import Settings, asyncpg_url
from app.operation_documents import document_id, operations
from app.posts.ids import EPOCH_MS, SEQUENCE_BITS
from benchmarks.common import (
    Postgres,
    base_database_url,
    cpu_seconds,
    free_port,
    percentile,
    pg_cpu_delta,
    private_redis,
    process_tree,
    start_server,
    stop_process,
    stop_processes,
    wait_for_timelines,
)
from benchmarks.feed_read import API_APP, Variant, closed_loop, wait_ready
from benchmarks.feed_wrk import INSTALL_HINT, Workload, read_timings, run_wrk
from devtools.provision import create_database, drop_database, migrate
from devtools.seed.common import USER_COLUMNS, refresh_user_counts, sync_user_sequence

PYTHON_LOAD = "python"  # the load generator when wrk is not installed
SETS = (0, 4)  # images per post of each viewer set
MEDIA_SELECTION = "media { url width height contentType alt }"
PAGE_SIZE = 20


def with_media(text: str) -> str:
    """A registered document over PostFields with Post.media selected (the demo's PostFields
    selects it; until it does, the same document with the field added)."""
    if "media {" in text:
        return text
    return text.replace("  viewerHasLiked\n", f"  viewerHasLiked\n  {MEDIA_SELECTION}\n", 1)


def feed_with_media() -> str:
    """The registered Feed document with Post.media selected (`with_media`)."""
    return with_media(operations()["Feed"])


def page_body(registered: bool) -> str:
    """A CHRONOLOGICAL first page's request body: by documentId when registered."""
    text = feed_with_media()
    variables = {"first": PAGE_SIZE, "mode": "CHRONOLOGICAL"}
    if registered:
        return orjson.dumps({"documentId": document_id(text), "variables": variables}).decode()
    return orjson.dumps({"query": text, "variables": variables}).decode()


def image(n: int) -> tuple[bytes, str, int, int]:
    """A real small image, different for every `n` (JPEG or PNG, two sizes): (bytes, type,
    width, height)."""
    from PIL import Image

    fmt, content_type = ("JPEG", "image/jpeg") if n % 2 else ("PNG", "image/png")
    size = (96, 64) if n % 3 else (64, 96)
    out = io.BytesIO()
    Image.new("RGB", size, (n % 251, (n // 251) % 251, 128)).save(out, fmt)
    return out.getvalue(), content_type, *size


@dataclass
class Seeded:
    viewers: dict[int, list[int]]  # set -> viewer ids
    posts: int
    media_rows: int


async def seed(dsn: str, settings: Settings, args: argparse.Namespace) -> Seeded:
    """Users, follows, posts and (set "4") post_media rows straight into PostgreSQL; the
    images into the local store, keyed as app.media keys them."""
    from app.media.keys import object_key
    from app.media.stores import make_store

    store = make_store(settings)
    objects: dict[str, tuple[str, str, int, int, int]] = {}
    made = 0

    async def new_object() -> str:
        nonlocal made
        made += 1
        data, content_type, width, height = image(made)
        key = object_key(settings.secret_key, hashlib.sha256(data).digest())
        if key not in objects:  # two close colours may compress to the same JPEG
            await store.write(key, data, content_type)
            objects[key] = (key, content_type, width, height, len(data))
        return key

    now = datetime.now(UTC).replace(microsecond=0)
    users, follows, posts, media = [], [], [], []
    viewers: dict[int, list[int]] = {}
    user_id = 0
    for images_per_post in SETS:
        authors = list(range(user_id + 1, user_id + 1 + args.authors))
        readers = list(range(authors[-1] + 1, authors[-1] + 1 + args.viewers))
        user_id = readers[-1]
        viewers[images_per_post] = readers
        for uid in (*authors, *readers):
            kind = "a" if uid in authors else "v"
            users.append((uid, f"{kind}{images_per_post}_{uid}", "x", f"User {uid}", now, now))
        follows += [(v, a, now - timedelta(days=40)) for v in readers for a in authors]
        for a in authors:
            for n in range(args.posts_per_author):
                created = now - timedelta(minutes=n * 37 + a)
                ms = int(created.timestamp() * 1000)
                post_id = ((ms - EPOCH_MS) << SEQUENCE_BITS) | (a % (1 << SEQUENCE_BITS))
                visibility = "public" if n % 2 == 0 else "followers"
                body = f"post {n} by {a}: about as long as a post usually is here #tag"
                posts.append((post_id, a, created, body, visibility))
                for position in range(images_per_post):  # an object of its own each
                    key = await new_object()
                    media.append((post_id, position, key, f"image {position} of post {n}"))
    await store.close()
    conn = await asyncpg.connect(asyncpg_url(dsn))
    try:
        async with conn.transaction():
            await conn.copy_records_to_table(
                "users",
                records=users,
                columns=USER_COLUMNS,
            )
            await sync_user_sequence(conn)
            await conn.copy_records_to_table(
                "follows", records=follows, columns=("follower_id", "followee_id", "created_at")
            )
            await conn.copy_records_to_table(
                "posts",
                records=posts,
                columns=("id", "author_id", "created_at", "body", "visibility"),
            )
            await conn.copy_records_to_table(
                "media_objects",
                records=list(objects.values()),
                columns=("key", "content_type", "width", "height", "byte_size"),
            )
            await conn.copy_records_to_table(
                "post_media", records=media, columns=("post_id", "position", "media_key", "alt")
            )
            await refresh_user_counts(conn, settings.fanout_pull_threshold)
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()
    return Seeded(viewers, len(posts), len(media))


# -- queries per page, in process --------------------------------------------------------------


@dataclass
class Counted:
    queries: list[int] = field(default_factory=list)  # statements per page
    media_queries: list[int] = field(default_factory=list)  # of which post_media reads
    images: list[int] = field(default_factory=list)  # images per page
    compiled: int = 0  # pages the compiled path answered


async def count_queries(
    tokens: dict[int, list[str]], body: str, pages: int, profile: int = 0
) -> dict[int, Counted]:
    """Per set: SQL statements per page (the engine's events) over `pages` pages, with the
    app built in this process on the benchmark's database (env set by the caller). Every
    viewer's page is read once first (cold timelines are rebuilt then, and a text document
    is planned). `profile`: that many more pages per set under cProfile, printed."""
    import cProfile
    import pstats

    import httpx
    from sqlalchemy import event

    from app.api.fast.compiled_http import COMPILED
    from app.feed.rows import _MODES_EPOCH
    from app.state import create_state
    from app.web import create_app

    def compiled_total() -> float:
        return sum(
            s.value for m in COMPILED.collect() for s in m.samples if s.name.endswith("_total")
        )

    state = create_state()
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement != _MODES_EPOCH:  # once a second per process, not per page
            seen.append(statement)

    engine = state.engine.sync_engine
    found = {n: Counted() for n in SETS}
    transport = httpx.ASGITransport(app=create_app(state))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

            async def page(token: str) -> dict[str, Any]:
                headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
                reply = await client.post("/graphql", content=body, headers=headers)
                data: dict[str, Any] = reply.json()
                assert reply.status_code == 200 and "errors" not in data, data
                return data

            for n in SETS:
                for token in tokens[n]:
                    await page(token)
            await asyncio.sleep(2)  # the timelines rebuilt in the background
            event.listen(engine, "before_cursor_execute", count)
            for n in SETS:
                for i in range(pages):
                    seen.clear()
                    before = compiled_total()
                    data = await page(tokens[n][i % len(tokens[n])])
                    edges = data["data"]["feed"]["edges"]
                    found[n].queries.append(len(seen))
                    found[n].media_queries.append(sum("post_media" in s for s in seen))
                    found[n].images.append(sum(len(e["node"]["media"]) for e in edges))
                    found[n].compiled += compiled_total() > before
            event.remove(engine, "before_cursor_execute", count)
            for n in SETS if profile else ():
                profiler = cProfile.Profile()
                started = time.process_time()
                profiler.enable()
                for i in range(profile):
                    await page(tokens[n][i % len(tokens[n])])
                profiler.disable()
                cpu = 1000 * (time.process_time() - started) / profile
                print(
                    f"\n-- in-process profile, {n} images/post: {cpu:.2f} ms CPU/page", flush=True
                )
                pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
    finally:
        await state.close()
    return found


# -- load ------------------------------------------------------------------------------------


@dataclass
class Totals:
    pages: int = 0
    seconds: float = 0.0
    api_cpu: float = 0.0
    pg_cpu: float = 0.0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)

    def row(self, n: int, counted: Counted) -> dict[str, Any]:
        lat = sorted(self.latencies)
        pages = max(self.pages, 1)
        return {
            "images_per_post": n,
            "pages": self.pages,
            "pages_per_s": round(self.pages / self.seconds, 1) if self.seconds else 0.0,
            "api_cpu_ms_per_page": round(1000 * self.api_cpu / pages, 3),
            "pg_cpu_ms_per_page": round(1000 * self.pg_cpu / pages, 3),
            "p50_ms": round(percentile(lat, 0.50), 2) if lat else None,
            "p99_ms": round(percentile(lat, 0.99), 2) if lat else None,
            "errors": self.errors,  # non-200s and GraphQL errors: 0, or the figures are not pages
            "queries_per_page": round(sum(counted.queries) / max(len(counted.queries), 1), 2),
            "media_queries_per_page": round(
                sum(counted.media_queries) / max(len(counted.media_queries), 1), 2
            ),
            "images_per_page": round(sum(counted.images) / max(len(counted.images), 1), 1),
            "compiled_pages": f"{counted.compiled}/{len(counted.queries)}",
        }


async def one_run(
    args: argparse.Namespace,
    wrk: str,
    base: str,
    load: Workload,
    workdir: Path,
    api_pid: int,
    postgres: Postgres,
    totals: Totals | None,
) -> None:
    """One load run of --seconds for one set (`totals` None: a warm-up), with wrk or, when
    it is not installed, feed_read's closed loop of httpx clients (its latencies include the
    client's own time; the API's CPU is the server processes' either way)."""
    pids = process_tree(api_pid)
    pg0 = await postgres.snapshot()
    cpu0 = cpu_seconds(pids)
    if wrk == PYTHON_LOAD:
        requests = [
            ({"authorization": f"Bearer {t}", "content-type": "application/json"},
             load.first_body.encode())
            for t in load.tokens
        ]  # fmt: skip
        variant = Variant(load.key, API_APP, "", "", "feed")
        result = await closed_loop(base, variant, requests, args.connections, args.seconds, [], 42)
        latencies = [1000 * v for v in result.latencies]
        pages, seconds, errors = result.requests, result.seconds, result.errors
    else:
        tag = f"{load.key}-{uuid.uuid4().hex[:6]}"
        latency_dir = workdir / tag
        latency_dir.mkdir()
        data = workdir / f"{tag}.lua"
        data.write_text(load.lua(42, 1, latency_dir))
        found, _ = await asyncio.to_thread(
            run_wrk, wrk, f"{base}/graphql", data, args.connections, args.seconds, 30,
            workdir / "wrk.log",
        )  # fmt: skip
        since = str(found.get("inflight_since_us") or "")
        timings = read_timings(latency_dir, since, args.seconds)
        latencies = timings.latencies["f"]
        pages, seconds = len(latencies), timings.seconds
        errors = int(found.get("c_non200") or 0) + int(found.get("c_errors") or 0)
    api_cpu = cpu_seconds(pids) - cpu0
    pg_cpu = pg_cpu_delta(pg0, await postgres.snapshot())
    if totals is None:
        return
    totals.pages += pages
    totals.seconds += seconds
    totals.api_cpu += api_cpu
    totals.pg_cpu += pg_cpu
    totals.errors += errors
    totals.latencies += latencies


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| images/post | pages | errors | pages/s | API CPU ms/page | PG CPU ms/page | p50 ms "
        "| p99 ms | SQL queries/page | of which media | images/page | compiled |"
    )
    lines = [head, "|" + " --- |" * 12]
    for r in rows:
        lines.append(
            f"| {r['images_per_post']} | {r['pages']} | {r['errors']} | {r['pages_per_s']} | "
            f"{r['api_cpu_ms_per_page']} | {r['pg_cpu_ms_per_page']} | {r['p50_ms']} | "
            f"{r['p99_ms']} | {r['queries_per_page']} | {r['media_queries_per_page']} | "
            f"{r['images_per_page']} | {r['compiled_pages']} |"
        )
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    wrk = shutil.which("wrk") if args.load != PYTHON_LOAD else None
    if wrk is None:
        if args.load == "wrk":
            print(f"wrk is not installed ({INSTALL_HINT})", file=sys.stderr)
            raise SystemExit(2)
        wrk = PYTHON_LOAD
    from app.auth.tokens import issue_token

    workdir = Path(tempfile.mkdtemp(prefix="media_pages_"))
    base_db = base_database_url()
    name = f"bench_media_{uuid.uuid4().hex[:6]}"
    dsn = create_database(base_db, name)
    redis_proc, redis_url = private_redis(workdir)
    secret = secrets.token_urlsafe(48)
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "REDIS_URL": redis_url,
        "SECRET_KEY": secret,
        "MEDIA_STORE": "local",
        "MEDIA_LOCAL_DIR": str(workdir / "media"),
    }
    # As feed_wrk: a few viewers read many pages a second, past the default read budgets.
    env.setdefault("RATE_LIMIT_READS_PER_IP_PER_MINUTE", "0")
    env.setdefault("RATE_LIMIT_READS_PER_MINUTE", "1000000")
    names = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "RATE_LIMIT_READS_PER_IP_PER_MINUTE")
    os.environ.update({k: env[k] for k in (*names, "RATE_LIMIT_READS_PER_MINUTE")})
    os.environ.update(MEDIA_STORE="local", MEDIA_LOCAL_DIR=str(workdir / "media"))
    api: Any = None
    admin: asyncpg.Connection | None = None
    try:
        migrate(dsn)
        settings = Settings(secret_key=secret, media_local_dir=str(workdir / "media"))
        started = time.perf_counter()
        seeded = await seed(dsn, settings, args)
        print(
            f"seeded {name}: {seeded.posts} posts, {seeded.media_rows} post_media rows "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        tokens = {n: [issue_token(settings, v) for v in ids] for n, ids in seeded.viewers.items()}
        port = free_port()
        api = start_server(API_APP, env, port, args.workers, workdir / "api.log")
        base = f"http://127.0.0.1:{port}"
        await wait_ready(base, api, workdir / "api.log")
        from app.api.endpoint.schema import build_schema

        registered = build_schema(settings).documents.lookup(feed_with_media()) is not None
        body = page_body(registered)
        counted = await count_queries(tokens, body, args.count_pages, args.profile)
        from redis.asyncio import Redis

        redis = Redis.from_url(redis_url)
        missing = await wait_for_timelines(
            redis, [v for ids in seeded.viewers.values() for v in ids]
        )
        await redis.aclose()
        if missing:
            print(f"warning: {missing} timelines still cold", file=sys.stderr)
        admin = await asyncpg.connect(asyncpg_url(base_db))
        postgres = Postgres(admin, name)
        loads = {n: Workload(f"img{n}", "any", API_APP, "first", tokens[n], body) for n in SETS}
        for n in SETS:  # warm-up, not measured
            await one_run(args, wrk, base, loads[n], workdir, api.pid, postgres, None)
        totals = {n: Totals() for n in SETS}
        for r in range(args.rounds):
            order = SETS if r % 2 == 0 else tuple(reversed(SETS))
            for n in order:
                await one_run(args, wrk, base, loads[n], workdir, api.pid, postgres, totals[n])
        rows = [totals[n].row(n, counted[n]) for n in SETS]
        ratio = rows[1]["api_cpu_ms_per_page"] / max(rows[0]["api_cpu_ms_per_page"], 1e-9)
        pg_ratio = rows[1]["pg_cpu_ms_per_page"] / max(rows[0]["pg_cpu_ms_per_page"], 1e-9)
        command = "python -m benchmarks.media_pages " + " ".join(sys.argv[1:])
        print(f"\n$ {command.strip()}")
        print(
            f"document: Feed with Post.media ({'registered' if registered else 'text'}), "
            f"CHRONOLOGICAL first pages of {PAGE_SIZE}; load: {os.path.basename(wrk)}, "
            f"{args.workers} worker(s), "
            f"{args.connections} connections, {args.rounds} x {args.seconds} s per set"
        )
        print(table(rows))
        print(
            f"API CPU per page, 4 images vs 0: x{ratio:.3f} (target <= 1.10); "
            f"PostgreSQL: x{pg_ratio:.3f}"
        )
        summary = {
            "rows": rows,
            "api_cpu_ratio": round(ratio, 3),
            "pg_cpu_ratio": round(pg_ratio, 3),
        }
        print("MEDIA_PAGES_RESULT " + json.dumps(summary))
        return summary
    finally:
        if admin is not None:
            await admin.close()
        if api is not None:
            stop_processes([api])
        stop_process(redis_proc)
        with contextlib.suppress(Exception):
            drop_database(base_db, name)
        shutil.rmtree(workdir, ignore_errors=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seconds", type=int, default=8)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--authors", type=int, default=30)
    p.add_argument("--posts-per-author", type=int, default=40)
    p.add_argument("--viewers", type=int, default=40)
    p.add_argument("--count-pages", type=int, default=20)
    p.add_argument("--profile", type=int, default=0, help="pages per set under cProfile")
    p.add_argument(
        "--load",
        choices=("auto", "wrk", PYTHON_LOAD),
        default="auto",
        help="load generator: wrk (auto: when installed) or httpx clients (feed_read's)",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    asyncio.run(run(parser().parse_args(argv)))


if __name__ == "__main__":
    main()
