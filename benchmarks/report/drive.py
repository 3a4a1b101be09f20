"""Driving the running system: resets between strategies, the post stream over HTTP, waiting
for the fan-out to settle, post-to-visible from the jobs' results, feed reads in a closed loop,
lane lag sampling."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import numpy as np
from tqdm import tqdm

from app.db.models import FANOUT_PULL, FANOUT_PUSH
from app.fanout import lanes
from app.fanout.lag import lane_lag_seconds
from app.timelines.store import TimelineStore, timeline_key
from benchmarks.common import pg_cpu_delta
from benchmarks.report.system import WORKER_SPECS, Client, System
from benchmarks.timeline_encoding import COPY_SCRIPT

# jobs.worker's cron names (importing jobs.worker needs REDIS_URL set): the reconciler, the
# control plane's pass, housekeeping, the canaries' pruner and the engagement log's jobs.
PERIODIC = (
    "cron:",
    "cron_",
    "reconcile_fanouts:",
    "review_fanout_modes:",
    "housekeeping:",
    "prune_canary_posts:",
)
HUGE = 2_000_000_000  # a follower count no author reaches
ACTIVE_SQL = "last_active_at >= now() - make_interval(days => 30)"
LAG_SAMPLE_SECONDS = 0.5
AUTHOR_CACHE_SECONDS = 2.5  # app.feed.constants: the author-index cache's TTL (2 s) and a margin


@dataclass(frozen=True)
class Strategy:
    key: str
    label: str
    env: dict[str, str]
    pull_threshold: int  # decides the authors' starting modes, as the seed does


def strategies(pull: int, push: int) -> dict[str, Strategy]:
    one_lane = {"BIG_AUTHOR_FOLLOWERS": str(HUGE)}
    return {
        "push": Strategy(
            "push",
            "push-only (one lane)",
            {"FANOUT_CONTROL": "threshold", "FANOUT_PULL_THRESHOLD": str(HUGE),
             "FANOUT_PUSH_THRESHOLD": str(HUGE - 1), **one_lane},
            HUGE,
        ),
        "push-lanes": Strategy(
            "push-lanes",
            "push-only + big lane",
            {"FANOUT_CONTROL": "threshold", "FANOUT_PULL_THRESHOLD": str(HUGE),
             "FANOUT_PUSH_THRESHOLD": str(HUGE - 1)},
            HUGE,
        ),
        "pull": Strategy(
            "pull",
            "pull-only",
            {"FANOUT_CONTROL": "threshold", "FANOUT_PULL_THRESHOLD": "1",
             "FANOUT_PUSH_THRESHOLD": "0"},
            1,
        ),
        "hybrid": Strategy(
            "hybrid",
            f"hybrid, constant thresholds ({pull:,}/{push:,})",
            {"FANOUT_CONTROL": "threshold", "FANOUT_PULL_THRESHOLD": str(pull),
             "FANOUT_PUSH_THRESHOLD": str(push)},
            pull,
        ),
        "control": Strategy(
            "control",
            "hybrid, control plane (FANOUT_CONTROL=cost)",
            {"FANOUT_CONTROL": "cost", "FANOUT_PULL_THRESHOLD": str(pull),
             "FANOUT_PUSH_THRESHOLD": str(push)},
            pull,
        ),
    }  # fmt: skip


def swept(threshold: int) -> Strategy:
    push = max(0, int(threshold * 0.8))
    return Strategy(
        f"sweep-{threshold}",
        f"hybrid at {threshold:,}",
        {"FANOUT_CONTROL": "threshold", "FANOUT_PULL_THRESHOLD": str(threshold),
         "FANOUT_PUSH_THRESHOLD": str(push)},
        threshold,
    )  # fmt: skip


async def active_ids(dsn: str) -> np.ndarray:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(f"SELECT id FROM users WHERE {ACTIVE_SQL} ORDER BY id")
    finally:
        await conn.close()
    return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))


async def materialize_empty(system: System, ids: np.ndarray) -> None:
    """An empty timeline (the store's EMPTY marker) for each id, copied server-side from one
    template: active users have one (a read or a login builds it); fan-out skips the rest.
    (A generic helper: benchmarks.fanout_path.materialize does this for a range of ids.)"""
    assert system.redis is not None
    store = TimelineStore(system.redis, 800, 200)
    await store.rebuild(-1, [])
    copy = system.redis.register_script(COPY_SCRIPT)
    step = 5000
    for i in tqdm(range(0, len(ids), step), desc="timelines ", unit="chunk", leave=False):
        await copy(keys=[timeline_key(-1)], args=[timeline_key(int(u)) for u in ids[i : i + step]])
    await system.redis.delete(timeline_key(-1))


async def reset(
    system: System, strategy: Strategy, active: np.ndarray, pins: dict[int, str] | None = None
) -> None:
    """No posts, empty Redis, every active user an empty timeline, authors in the modes the
    strategy starts from; then the workers started with the strategy's settings."""
    system.stop(*WORKER_SPECS)
    conn = await asyncpg.connect(system.dsn)
    try:
        await conn.execute(
            "TRUNCATE posts, outbox, likes, comments, idempotency_keys, "
            "comment_idempotency_keys CASCADE"
        )
        await conn.execute(
            "UPDATE users SET fanout_mode = m, fanout_mode_changed_at = NULL, fanout_pin = NULL "
            "FROM (SELECT id AS uid, CASE WHEN follower_count >= $1 THEN $2::smallint "
            "ELSE $3::smallint END AS m FROM users) s "
            "WHERE id = s.uid AND (fanout_mode <> s.m OR fanout_mode_changed_at IS NOT NULL)",
            strategy.pull_threshold,
            FANOUT_PULL,
            FANOUT_PUSH,
        )
        # Pinned authors (the curves): their mode whatever the thresholds (decision 0026).
        for pin in ("push", "pull"):
            ids = [a for a, p in (pins or {}).items() if p == pin]
            if ids:
                await conn.execute(
                    "UPDATE users SET fanout_pin = $1, fanout_mode = $2 WHERE id = ANY($3)",
                    pin,
                    FANOUT_PULL if pin == "pull" else FANOUT_PUSH,
                    ids,
                )
        # The mass UPDATE leaves dead rows in users and its partial pull index (pull-only
        # marks ~every author): without this, the next strategy's reads scan millions of them.
        await conn.execute("VACUUM (ANALYZE) users")
    finally:
        await conn.close()
    assert system.redis is not None
    await system.redis.flushall()
    await system.redis.config_resetstat()
    await materialize_empty(system, active)
    for name in WORKER_SPECS:
        system.start(name, strategy.env)
    # The API stays up (no setting of a strategy is read by it); its in-process author-index
    # cache lives AUTHOR_CACHE_SECONDS: nothing of the previous strategy is served after it.
    started = time.monotonic()
    health = [f"{q}:health-check" for q in lanes.LANES.values()]  # ARQ's per-queue key
    while await system.redis.exists(*health) < len(health):
        if system.dead() or time.monotonic() - started > 120:
            raise RuntimeError(f"workers not up: {system.dead()} (logs in {system.workdir})")
        await asyncio.sleep(0.05)
    await asyncio.sleep(max(0.0, AUTHOR_CACHE_SECONDS - (time.monotonic() - started)))


@dataclass
class Posted:
    author: int
    sent: float  # epoch seconds, the createPost request sent
    acked: float
    post_id: int = 0
    celebrity: bool = False


async def post_stream(
    client: Client, schedule: list[tuple[float, int, bool]], desc: str
) -> list[Posted]:
    """createPost over HTTP at each (offset s, author, is celebrity) of the schedule."""
    t0 = time.time()
    bar = tqdm(total=len(schedule), desc=f"{desc:<10}", unit="post", leave=False)

    async def one(offset: float, author: int, celebrity: bool) -> Posted:
        await asyncio.sleep(max(0.0, t0 + offset - time.time()))
        sent = time.time()
        data = await client.call(author, "CreatePost", {"body": f"bench {author} {offset:.2f}"})
        bar.update(1)
        return Posted(author, sent, time.time(), int(data["createPost"]["id"]), celebrity)

    try:
        return list(await asyncio.gather(*(one(*s) for s in schedule)))
    finally:
        bar.close()


async def settle(system: System, limit_s: float = 1800) -> float:
    """Until the outbox is relayed and both lanes are empty; returns the seconds waited."""
    assert system.redis is not None
    started = time.monotonic()
    conn = await asyncpg.connect(system.dsn)
    try:
        while time.monotonic() - started < limit_s:
            if system.dead():
                raise RuntimeError(f"exited: {system.dead()} (logs in {system.workdir})")
            waiting = await conn.fetchval("SELECT count(*) FROM outbox WHERE published_at IS NULL")
            if waiting == 0 and not await queued_jobs(system):
                return time.monotonic() - started
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise TimeoutError(f"fan-out not settled after {limit_s} s")


async def queued_jobs(system: System) -> list[str]:
    """Jobs waiting or running on either lane, but the periodic ones (PERIODIC: ids
    `<cron name>:<ms>`), which ARQ enqueues a little ahead of their time."""
    assert system.redis is not None
    found: list[str] = []
    for queue in lanes.LANES.values():
        found += [m.decode() for m in await system.redis.zrange(queue, 0, -1)]
    return [j for j in found if not j.startswith(PERIODIC)]


@dataclass
class Visibility:
    visible_ms: dict[int, float]  # post -> createPost sent -> visible to every active follower
    pulled: set[int]  # posts split in PULL mode (or with nobody to push to)
    batches: dict[int, int]


def visibility(posted: list[Posted], results: dict[str, Any]) -> Visibility:
    split_of: dict[int, Any] = {}
    done_of: dict[int, float] = {}
    for key, r in results.items():
        if r.function == "fanout_post" and r.args:
            split_of[int(r.args[0])] = r
        elif key.startswith("fb:"):
            post = int(key.split(":")[1])
            done_of[post] = max(done_of.get(post, 0.0), r.finish_time.timestamp())
    out = Visibility({}, set(), {})
    for p in posted:
        split = split_of.get(p.post_id)
        if split is None:
            raise RuntimeError(f"post {p.post_id} was never split")
        out.batches[p.post_id] = int(split.result or 0)
        if not split.result:
            out.pulled.add(p.post_id)
            done = split.finish_time.timestamp()
        else:
            done = done_of[p.post_id]
        out.visible_ms[p.post_id] = max(0.0, done - p.sent) * 1000
    return out


async def commandstats(system: System) -> dict[str, int]:
    assert system.redis is not None
    stats = await system.redis.info("commandstats")
    return {k[len("cmdstat_") :]: int(v["calls"]) for k, v in stats.items()}


async def used_memory(system: System) -> int:
    assert system.redis is not None
    return int((await system.redis.info("memory"))["used_memory"])


@dataclass
class Reads:
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    degraded: int = 0
    empty: int = 0
    cpu_ms_per_read: dict[str, float] = field(default_factory=dict)  # api, redis, postgres


FEED_QUERY_MODE = "CHRONOLOGICAL"


async def read_loop(
    system: System,
    client: Client,
    viewers: list[int],
    reads: int,
    clients: int,
    *,
    naive_doc: str | None = None,
    bare: bool = False,
    desc: str = "reads",
    budget_s: float = 120.0,
) -> Reads:
    """`reads` feed first pages (20 posts, CHRONOLOGICAL) of the viewers in turn, by `clients`
    concurrent clients; naive_doc: the stock server's naiveFeed instead; bare: its /healthz.
    At most `budget_s` seconds measuring (and half of it warming up): a strategy whose reads
    take seconds gets fewer of them, counted in the result."""
    out = Reads()
    admin = await asyncpg.connect(system.base_db)
    pg = system.postgres(admin)
    names = ("stock",) if naive_doc or bare else ("api",)
    http = client.http if not (naive_doc or bare) else None
    stock_http = None
    if http is None:
        import httpx

        stock_http = httpx.AsyncClient(base_url=system.stock, timeout=60)
    bar = tqdm(total=reads, desc=f"{desc:<10}", unit="read", leave=False)
    measuring = False

    async def one(viewer: int) -> None:
        started = time.perf_counter()
        try:
            if bare:
                assert stock_http is not None
                reply = await stock_http.get("/healthz")
                ok = reply.status_code == 200
                data = None
            elif naive_doc:
                assert stock_http is not None
                reply = await stock_http.post(
                    "/graphql",
                    json={"query": naive_doc, "operationName": "NaiveFeed",
                          "variables": {"first": 20}},
                    headers={"Authorization": f"Bearer {client.token(viewer)}"},
                )  # fmt: skip
                body = reply.json()
                ok = reply.status_code == 200 and not body.get("errors")
                data = body.get("data", {}).get("naiveFeed") if ok else None
            else:
                answer = await client.call(viewer, "Feed", {"first": 20, "mode": FEED_QUERY_MODE})
                ok, data = True, answer["feed"]
        except Exception:
            ok, data = False, None
        elapsed = (time.perf_counter() - started) * 1000
        if not measuring:
            return
        if not ok:
            out.errors += 1
            return
        out.latencies_ms.append(elapsed)
        if data is not None:
            out.degraded += bool(data.get("degraded"))
            out.empty += not data["edges"]
        bar.update(1)

    deadline = 0.0

    async def worker() -> None:
        while queue and time.monotonic() < deadline:
            await one(queue.pop())

    # Warm-up, not measured: one read per viewer (fills the API's author caches, connections).
    queue = list(dict.fromkeys(viewers))[:reads]
    deadline = time.monotonic() + budget_s / 2
    await asyncio.gather(*(worker() for _ in range(clients)))
    queue = [viewers[i % len(viewers)] for i in range(reads)]
    deadline = time.monotonic() + budget_s
    measuring = True
    cpu0, redis0, pg0 = system.cpu(*names), system.redis_cpu(), await pg.snapshot()
    try:
        await asyncio.gather(*(worker() for _ in range(clients)))
    finally:
        bar.close()
        n = max(1, len(out.latencies_ms))
        out.cpu_ms_per_read = {
            "service": (system.cpu(*names) - cpu0) * 1000 / n,
            "redis": (system.redis_cpu() - redis0) * 1000 / n,
            "postgres": pg_cpu_delta(pg0, await pg.snapshot()) * 1000 / n,
        }
        await admin.close()
        if stock_http is not None:
            await stock_http.aclose()
    return out


async def lag_sampler(system: System, stop: asyncio.Event, into: list[tuple[float, float, float]]):  # type: ignore[no-untyped-def]
    """(seconds since start, default lane lag, big lane lag) every LAG_SAMPLE_SECONDS."""
    assert system.redis is not None
    t0 = time.monotonic()
    while not stop.is_set():
        lags = await lane_lag_seconds(system.redis)
        into.append((time.monotonic() - t0, lags["default"][0], lags["big"][0]))
        await asyncio.sleep(LAG_SAMPLE_SECONDS)
