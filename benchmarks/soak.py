"""A bounded soak (issue 11): mixed reads, writes and live subscriptions against the whole
service on loopback for some minutes; memory, live-update lag and error rate per time window,
and whether they stayed stable.

    python -m benchmarks.soak [--minutes 3] [--window 20] [--readers 6] [--writers 2]
        [--subscribers 40] [--users 300] [--keep]

What it runs (all on 127.0.0.1, nothing else touched):
- a private `redis-server` on a free port (no persistence), and a scratch database
  `soak_<hex>` on DATABASE_URL's server (default the local postgres), migrated, dropped at
  the end unless --keep;
- the processes `make run` starts: `uvicorn app.web:app`, the outbox relay and both ARQ
  workers (jobs.worker), with the write and read rate limits lifted (every client is one IP);
- users made by one INSERT (active, tokens from app.auth.tokens), each following 15 others;
  five "probe" authors, each followed by --subscribers / 5 users that follow nobody else.
Load, as closed loops of GraphQL over HTTP (the project's own documents, graphql/operations):
- readers: a RANKED or CHRONOLOGICAL first page of a random user's feed, then 0-2 next pages;
- writers: createPost (60%, any visibility), follow (15%), unfollow (10%), likePost of a
  recent public post (10%), deletePost of one's own recent post (5%);
- subscribers: `feedUpdates` websockets (benchmarks/ws_client); a probe author posts every
  second in turn, and the lag is its createPost request sent -> the follower's frame.
Per window: requests/s, errors (HTTP not 200, transport errors, codes INTERNAL, OVERLOADED,
RATE_LIMITED, CURSOR_EXPIRED) and refusals (NOT_FOUND, FORBIDDEN, BAD_USER_INPUT: random
actions on deleted posts), read p50/p99, lag p50/p99 and frames missing, RSS of the API and
of the relay and workers, Redis used memory, tracebacks in the processes' logs so far. At the
end a verdict: stable when RSS grew less than 15% (and 30 MB) from the second window to the
last, every window's error rate stayed under 1%, the last window's lag p99 is under 2 s,
every probe post reached its followers and no process logged a traceback. Figures of a run: docs/RELIABILITY.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
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
import httpx
import orjson
import psutil
from redis.asyncio import Redis

from app.auth.tokens import issue_token
from app.config import PROJECT_ROOT, Settings
from app.operation_documents import operations
from benchmarks.common import (
    base_database_url,
    free_port,
    percentile,
    private_redis,
    stop_process,
)
from benchmarks.ws_client import LeanSocket, open_lean
from devtools.launcher import PROCESSES
from devtools.provision import create_database, drop_database, migrate

PROBES = 5
FOLLOWS_PER_USER = 15
ERROR_CODES = {"INTERNAL", "OVERLOADED", "RATE_LIMITED", "CURSOR_EXPIRED"}
SUBSCRIBE = {
    "id": "1",
    "type": "subscribe",
    "payload": {"query": "subscription { feedUpdates { newPostCount latestPostAt } }"},
}
SECRET = "soak-benchmark-secret-key-that-is-long-enough-for-hs256"


# -- figures ----------------------------------------------------------------------------------


@dataclass
class Window:
    reads: int = 0
    writes: int = 0
    errors: int = 0
    refusals: int = 0
    read_ms: list[float] = field(default_factory=list)
    lag_ms: list[float] = field(default_factory=list)
    error_kinds: dict[str, int] = field(default_factory=dict)

    def error(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


@dataclass
class Soak:
    now: Window = field(default_factory=Window)
    probe_posted: dict[int, float] = field(default_factory=dict)  # probe index -> ack time
    probe_posts: int = 0
    frames_expected: int = 0
    frames_seen: int = 0
    stop: bool = False


# -- processes --------------------------------------------------------------------------------


class Processes:
    """The service as `make run` starts it, on the scratch servers."""

    def __init__(self, env: dict[str, str], port: int, logdir: Path) -> None:
        self.env, self.port, self.logdir = env, port, logdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        # The service only: not the synthetic probe, which a caller runs beside the soak when
        # it wants one (benchmarks.dashboard_plot does). Two probes on one database share
        # their canaries and undo each other's changes: false leaks.
        argv = {spec.name: spec.command(self.port) for spec in PROCESSES if spec.name != "probe"}
        for name, args in argv.items():
            with (self.logdir / f"{name}.log").open("wb") as out:
                self.procs[name] = subprocess.Popen(
                    args, cwd=PROJECT_ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
                )

    def rss_mb(self, name: str) -> float:
        proc = self.procs[name]
        try:
            root = psutil.Process(proc.pid)
            tree = [root, *root.children(recursive=True)]
            return sum(p.memory_info().rss for p in tree) / 2**20
        except psutil.NoSuchProcess:
            return float("nan")

    def logged_exceptions(self) -> int:
        """Tracebacks in the processes' logs so far (errors no client saw: background work)."""
        return sum(
            (self.logdir / f"{name}.log").read_text(errors="replace").count("Traceback")
            for name in self.procs
        )

    def dead(self) -> list[str]:
        return [name for name, proc in self.procs.items() if proc.poll() is not None]

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# -- load -------------------------------------------------------------------------------------


class Gql:
    def __init__(self, base: str) -> None:
        self.docs = operations()
        self.client = httpx.AsyncClient(base_url=base, timeout=30)

    async def call(
        self, soak: Soak, token: str, op: str, variables: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The operation's data, or None after counting an error or a refusal."""
        body = {"query": self.docs[op], "variables": variables, "operationName": op}
        try:
            reply = await self.client.post(
                "/graphql", content=orjson.dumps(body), headers=_headers(token)
            )
        except httpx.HTTPError as exc:
            soak.now.error(type(exc).__name__)
            return None
        if reply.status_code != 200:
            soak.now.error(f"HTTP {reply.status_code}")
            return None
        answer = reply.json()
        codes = [(e.get("extensions") or {}).get("code", "?") for e in answer.get("errors") or []]
        if codes:
            if set(codes) & ERROR_CODES or "?" in codes:
                soak.now.error(codes[0])
            else:
                soak.now.refusals += 1
            return None
        return dict(answer["data"])


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}


async def reader(soak: Soak, gql: Gql, tokens: list[str], rng: random.Random) -> None:
    while not soak.stop:
        token = rng.choice(tokens)
        mode = rng.choice(["RANKED", "CHRONOLOGICAL"])
        after = None
        for _ in range(rng.randint(1, 3)):
            started = time.perf_counter()
            data = await gql.call(soak, token, "Feed", {"first": 20, "mode": mode, "after": after})
            soak.now.reads += 1
            if data is None:
                break
            soak.now.read_ms.append((time.perf_counter() - started) * 1000)
            info = data["feed"]["pageInfo"]
            if not info["hasNextPage"]:
                break
            after = info["endCursor"]


async def writer(soak: Soak, gql: Gql, users: list[tuple[str, str]], rng: random.Random) -> None:
    public: list[str] = []
    own: dict[str, list[str]] = {}
    while not soak.stop:
        token, _ = rng.choice(users)
        roll = rng.random()
        if roll < 0.6:
            visibility = rng.choice(["PUBLIC", "PUBLIC", "FOLLOWERS", "PRIVATE"])
            data = await gql.call(
                soak,
                token,
                "CreatePost",
                {"body": "soak " * rng.randint(1, 40), "visibility": visibility},
            )
            if data is not None:
                post_id = data["createPost"]["id"]
                own.setdefault(token, []).append(post_id)
                if visibility == "PUBLIC":
                    public.append(post_id)
                    del public[:-200]
        elif roll < 0.75:
            await gql.call(soak, token, "Follow", {"handle": rng.choice(users)[1]})
        elif roll < 0.85:
            await gql.call(soak, token, "Unfollow", {"handle": rng.choice(users)[1]})
        elif roll < 0.95 and public:
            await gql.call(soak, token, "LikePost", {"id": rng.choice(public)})
        elif own.get(token):
            await gql.call(soak, token, "DeletePost", {"id": own[token].pop(0)})
        soak.now.writes += 1


async def prober(soak: Soak, gql: Gql, probes: list[str], followers_each: int) -> None:
    """A probe author posts every second, in turn; its followers' frames give the lag."""
    turn = 0
    while not soak.stop:
        started = time.perf_counter()
        index = turn % len(probes)
        # From the request: a frame can beat the createPost answer to this loop.
        soak.probe_posted[index] = time.time()
        data = await gql.call(soak, probes[index], "CreatePost", {"body": "probe"})
        soak.now.writes += 1
        if data is not None:
            soak.probe_posts += 1
            soak.frames_expected += followers_each
        turn += 1
        await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - started)))


def on_frame(soak: Soak, probe: int, last: list[int]):  # type: ignore[no-untyped-def]
    def handle(payload: bytes, received: float) -> None:
        message = orjson.loads(payload)
        if message.get("type") != "next":
            return
        count = message["payload"]["data"]["feedUpdates"]["newPostCount"]
        if count > last[0]:
            posted = soak.probe_posted.get(probe)
            if posted is not None:
                soak.now.lag_ms.append(max(0.0, received - posted) * 1000)
            soak.frames_seen += min(count - last[0], 1)
        last[0] = count

    return handle


# -- the run ----------------------------------------------------------------------------------


async def make_users(dsn: str, n: int, subscribers: int, rng: random.Random) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        handles = [f"soak{i}" for i in range(n)]
        rows = await conn.fetch(
            "INSERT INTO users (handle, password_hash, display_name, last_active_at)"
            " SELECT h, '!', h, now() FROM unnest($1::text[]) h RETURNING id, handle",
            handles,
        )
        ids = {r["handle"]: r["id"] for r in rows}
        probes = handles[:PROBES]
        fans = handles[PROBES : PROBES + subscribers]
        others = handles[PROBES + subscribers :]
        pairs = set()
        for h in others:
            for other in rng.sample(others, min(FOLLOWS_PER_USER, len(others) - 1)):
                if other != h:
                    pairs.add((ids[h], ids[other]))
        for i, h in enumerate(fans):
            pairs.add((ids[h], ids[probes[i % PROBES]]))
        await conn.executemany(
            "INSERT INTO follows (follower_id, followee_id, created_at) VALUES ($1, $2, now())",
            sorted(pairs),
        )
        await conn.execute(
            "UPDATE users u SET following_count = (SELECT count(*) FROM follows WHERE"
            " follower_id = u.id), follower_count = (SELECT count(*) FROM follows WHERE"
            " followee_id = u.id)"
        )
        return {"ids": ids, "probes": probes, "fans": fans, "others": others}
    finally:
        await conn.close()


async def wait_healthy(base: str, procs: Processes, seconds: float = 60) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=2) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if procs.dead():
                raise RuntimeError(f"exited: {procs.dead()} (logs in {procs.logdir})")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get("/healthz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"not healthy after {seconds} s (logs in {procs.logdir})")


async def run(args: argparse.Namespace) -> bool:
    rng = random.Random(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="soak_"))
    redis_proc, redis_url = private_redis(workdir, workdir / "redis.log")
    base_db = base_database_url()
    name = f"soak_{uuid.uuid4().hex[:6]}"
    dsn = create_database(base_db, name)
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": dsn,
        "REDIS_URL": redis_url,
        "SECRET_KEY": SECRET,
        "RATE_LIMIT_WRITES_PER_MINUTE": "1000000",
        "RATE_LIMIT_READS_PER_MINUTE": "0",
        "RATE_LIMIT_READS_PER_IP_PER_MINUTE": "0",
        "REALTIME_NAMESPACE": name,
        # Every socket comes from loopback: the per-address caps (decision 0017) are off.
        "REALTIME_SOCKETS_PER_IP": "0",
        "REALTIME_SUBSCRIPTIONS_PER_IP": "0",
        "REALTIME_SUBSCRIBES_PER_IP_PER_MINUTE": "0",
    }
    procs = Processes(env, port, workdir)
    stable = False
    sockets: list[LeanSocket] = []
    try:
        migrate(dsn)
        world = await make_users(dsn, args.users, args.subscribers, rng)
        settings = Settings(secret_key=SECRET)  # type: ignore[call-arg]
        token = {h: issue_token(settings, i) for h, i in world["ids"].items()}
        procs.start()
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base, procs)
        soak = Soak()
        for i, fan in enumerate(world["fans"]):
            handle = on_frame(soak, i % PROBES, [0])
            ws = await open_lean("127.0.0.1", port, f"Bearer {token[fan]}", SUBSCRIBE, handle)
            sockets.append(ws)
        gql = Gql(base)
        others = [(token[h], h) for h in world["others"]]
        readers_tokens = [token[h] for h in world["others"]]
        tasks = [
            *(
                asyncio.create_task(reader(soak, gql, readers_tokens, random.Random(rng.random())))
                for _ in range(args.readers)
            ),
            *(
                asyncio.create_task(writer(soak, gql, others, random.Random(rng.random())))
                for _ in range(args.writers)
            ),
            asyncio.create_task(
                prober(soak, gql, [token[h] for h in world["probes"]], len(world["fans"]) // PROBES)
            ),
        ]
        redis = Redis.from_url(redis_url)
        print(
            f"soak: {args.minutes} min, windows of {args.window} s; {args.readers} readers, "
            f"{args.writers} writers, {len(sockets)} subscribers, {args.users} users; "
            f"database {name}, logs {workdir}",
            flush=True,
        )
        header = (
            "| t (s) | reads/s | writes/s | errors | error % | refusals | read p50 ms | "
            "read p99 ms | lag p50 ms | lag p99 ms | frames seen/expected | API RSS MB | "
            "relay+workers RSS MB | Redis MB | logged exceptions |"
        )
        print(header + "\n|" + "---:|" * (header.count("|") - 1), flush=True)
        rows: list[dict[str, float]] = []
        started = time.monotonic()
        end = started + args.minutes * 60
        seen0 = expected0 = 0
        while time.monotonic() < end:
            await asyncio.sleep(args.window)
            window, soak.now = soak.now, Window()
            elapsed = time.monotonic() - started
            info = await redis.info("memory")
            api = procs.rss_mb("api")
            back = sum(procs.rss_mb(n) for n in ("relay", "worker", "worker-big"))
            requests = window.reads + window.writes
            row = {
                "t": elapsed,
                "reads": window.reads / args.window,
                "writes": window.writes / args.window,
                "errors": window.errors,
                "error_pct": 100 * window.errors / max(1, requests),
                "refusals": window.refusals,
                "read_p50": percentile(window.read_ms, 0.5),
                "read_p99": percentile(window.read_ms, 0.99),
                "lag_p50": percentile(window.lag_ms, 0.5),
                "lag_p99": percentile(window.lag_ms, 0.99),
                "seen": soak.frames_seen - seen0,
                "expected": soak.frames_expected - expected0,
                "api": api,
                "back": back,
                "redis": info["used_memory"] / 2**20,
                "logged": procs.logged_exceptions(),
            }
            seen0, expected0 = soak.frames_seen, soak.frames_expected
            rows.append(row)
            kinds = f" {window.error_kinds}" if window.error_kinds else ""
            print(
                f"| {row['t']:.0f} | {row['reads']:.0f} | {row['writes']:.0f} | "
                f"{row['errors']:.0f}{kinds} | {row['error_pct']:.2f} | {row['refusals']:.0f} | "
                f"{row['read_p50']:.1f} | {row['read_p99']:.1f} | {row['lag_p50']:.0f} | "
                f"{row['lag_p99']:.0f} | {row['seen']:.0f}/{row['expected']:.0f} | "
                f"{row['api']:.0f} | {row['back']:.0f} | {row['redis']:.1f} | {row['logged']:.0f} |",
                flush=True,
            )
            if procs.dead():
                print(f"processes exited: {procs.dead()}")
                break
        soak.stop = True
        await asyncio.gather(*tasks, return_exceptions=True)
        # The last probe posts' frames: until each was seen or 10 s passed.
        deadline = time.monotonic() + 10
        while soak.frames_seen < soak.frames_expected and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await gql.client.aclose()
        await redis.aclose()
        stable = verdict(rows, soak, procs)
        return stable
    finally:
        for ws in sockets:
            ws.close()
        procs.stop()
        stop_process(redis_proc)
        if not args.keep:
            drop_database(base_db, name)
            if stable:
                shutil.rmtree(workdir, ignore_errors=True)


def verdict(rows: list[dict[str, float]], soak: Soak, procs: Processes) -> bool:
    problems: list[str] = []
    if len(rows) >= 3:
        first, last = rows[1], rows[-1]
        for key, label in (("api", "API"), ("back", "relay+workers")):
            grew = last[key] - first[key]
            if grew > max(30.0, 0.15 * first[key]):
                problems.append(f"{label} RSS grew {first[key]:.0f} -> {last[key]:.0f} MB")
    worst = max((r["error_pct"] for r in rows), default=0.0)
    if worst >= 1.0:
        problems.append(f"a window's error rate reached {worst:.2f}%")
    if rows and not rows[-1]["lag_p99"] < 2000:
        problems.append(f"last window's lag p99 {rows[-1]['lag_p99']:.0f} ms")
    if soak.frames_seen < soak.frames_expected:
        problems.append(f"frames seen {soak.frames_seen} of {soak.frames_expected}")
    if procs.dead():
        problems.append(f"processes exited: {procs.dead()}")
    if rows and rows[-1]["logged"]:
        problems.append(f"{rows[-1]['logged']:.0f} tracebacks in the logs ({procs.logdir})")
    total_errors = sum(r["errors"] for r in rows)
    print(
        f"\ntotals: {soak.probe_posts} probe posts, frames {soak.frames_seen}/"
        f"{soak.frames_expected}, errors {total_errors:.0f}"
    )
    print("stable: yes" if not problems else "stable: NO (" + "; ".join(problems) + ")")
    return not problems


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=3)
    parser.add_argument("--window", type=float, default=20)
    parser.add_argument("--readers", type=int, default=6)
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--subscribers", type=int, default=40)
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep", action="store_true", help="keep the database and the logs")
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    stable = asyncio.run(run(args))
    sys.exit(0 if stable else 1)


if __name__ == "__main__":
    main()
