"""Realtime subscribers benchmark (issue 5): N concurrent `feedUpdates` websockets against one
API process, publish-to-deliver latency, server CPU idle and under notifications, and memory
per idle socket.

    python -m benchmarks.subscribers --subscribers 100,1000,5000

It starts its own `uvicorn app.web:app` (one process, as `make run` does) against a scratch
database `feedbench_realtime` (re-created) and Redis db 14 (FLUSHED), uses DATABASE_URL/
REDIS_URL or the embedded servers, and runs the clients in this process (uvloop, `websockets`,
no compression: the launcher turns it off). The clients are benchmarks/ws_client.py, a
lean hand-parsed websocket client (~5 us a frame, where the `websockets` client cost ~70 us
and made the client the bottleneck). Client and server share the machine's two cores, so
latencies include the client's own work. Per size:

- connect: N sockets (connection_init + subscribe + first frame), 100 at a time;
- memory: server RSS growth / N after the sockets settle;
- idle: server CPU over --idle-seconds (uvicorn's websocket pings every 20 s included);
- spread: notifications through the workers' own path (`RedisNotifier.delivered`, one
  script call per batch), round-robin over the users so no user gets two inside the
  coalescing window, N/5 per second (20..1000); latency = PUBLISH call to frame received;
- celebrity: a pull-mode author followed by all N (or the first --audience of them) posts
  (`RedisNotifier.author_posted`, one message); every follower's socket gets a frame:
  latency per socket, --rounds rounds.

Past ~20,000 sockets (issue 38): the clients connect from several loopback source addresses
(127.0.0.2, 127.0.0.3, ...; --sockets-per-address each), since one address reaches one server
port from at most the ephemeral port range's ~28,000 ports; and both this process and the
server need a descriptor per socket: the open-file limit is raised as far as the OS allows
(app.api.transports.open_files) and N is capped under it, with the reason printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import psutil
import uvloop
from redis.asyncio import Redis

from app.api.transports.open_files import raise_open_files
from app.auth.tokens import issue_token
from app.config import PROJECT_ROOT, Settings
from app.realtime.notifier import RedisNotifier
from benchmarks.common import free_port, percentile, scratch_redis_url, with_redis_db
from benchmarks.ws_client import LeanSocket, open_lean
from devtools import provision

DB_NAME = "feedbench_realtime"
REDIS_DB = 14
NAMESPACE = "bench"
SECRET = "benchmark-secret-key-that-is-long-enough-for-hs256"
SUBSCRIBE_MESSAGE: dict[str, object] = {
    "id": "1",
    "type": "subscribe",
    "payload": {"query": "subscription { feedUpdates { newPostCount latestPostAt } }"},
}
BASE_POST_ID = 1_600_000_000_000_000_000  # 19 digits, any value works for counting


@dataclass
class Clients:
    """N subscribed sockets and what they received."""

    sockets: list[LeanSocket] = field(default_factory=list)
    sent_at: dict[int, float] = field(default_factory=dict)  # user -> PUBLISH time
    latencies: list[float] = field(default_factory=list)
    frames: int = 0
    all_in: asyncio.Event = field(default_factory=asyncio.Event)

    def on_frame(self, user_id: int, now: float) -> None:
        self.frames += 1
        sent = self.sent_at.pop(user_id, None)
        if sent is not None:
            self.latencies.append(now - sent)
            if not self.sent_at:
                self.all_in.set()


class Server:
    def __init__(
        self,
        env: dict[str, str],
        deflate: bool,
        profile_dir: str | None = None,
        spy: str | None = None,
        spy_dir: str | None = None,
    ) -> None:
        self.port = free_port()
        self.spy, self.spy_dir = spy, spy_dir
        self._spying: subprocess.Popen[bytes] | None = None
        args = ["--ws-per-message-deflate", "false"] if not deflate else []
        self.profiled = profile_dir is not None
        if profile_dir is not None:
            # benchmarks/profile_hook/sitecustomize.py: phases marked by `mark` below.
            os.makedirs(profile_dir, exist_ok=True)
            hook = str(PROJECT_ROOT / "benchmarks" / "profile_hook")
            env = {**env, "PYTHONPATH": hook, "BENCH_PROFILE_DIR": profile_dir}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.web:app", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning", *args],
            cwd=PROJECT_ROOT, env={**os.environ, **env},
        )  # fmt: skip
        self.ps = psutil.Process(self.proc.pid)
        self.ws_url = f"ws://127.0.0.1:{self.port}/graphql"

    async def ready(self) -> None:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}") as client:
            for _ in range(400):
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/healthz")).status_code == 200:
                        return
                await asyncio.sleep(0.05)
        raise TimeoutError("server did not start")

    async def metric(self, prefix: str) -> float:
        """Sum of every sample of one metric on the server's /metrics."""
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}") as client:
            text = (await client.get("/metrics")).text
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(prefix) and not line.startswith("#")
        )

    def mark(self, signum: int) -> None:
        """Start (SIGUSR1) or dump (SIGUSR2) a cProfile run, or dump the heap (SIGWINCH,
        with PYTHONTRACEMALLOC set), when the server runs the profiling hook."""
        if self.profiled:
            os.kill(self.proc.pid, signum)

    def spy_start(self, phase: str) -> None:
        """py-spy (--spy, outside the project) samples the server during one phase: its
        raw output goes to SPY_DIR/<phase>.txt (benchmarks/profile_hook/spy_shares.py)."""
        if self.spy is None or self.spy_dir is None:
            return
        os.makedirs(self.spy_dir, exist_ok=True)
        out = os.path.join(self.spy_dir, f"{phase}.txt")
        self._spying = subprocess.Popen(
            [self.spy, "record", "--pid", str(self.proc.pid), "--format", "raw", "--rate",
             "200", "--nonblocking", "-o", out],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def spy_stop(self) -> None:
        if self._spying is not None:
            self._spying.send_signal(signal.SIGINT)
            self._spying.wait(30)
            self._spying = None

    def cpu(self) -> float:
        t = self.ps.cpu_times()
        return float(t.user + t.system)

    def system_cpu(self) -> float:
        """Seconds in the kernel: for a broadcast, mostly the loopback sends (each carries
        the receiving side's TCP work too)."""
        return float(self.ps.cpu_times().system)

    def sched(self) -> tuple[int, int]:
        """Nanoseconds on CPU from the scheduler (`/proc/<pid>/schedstat`'s first field):
        the main thread's, and every live thread's summed (`task/*/schedstat`). Exact to
        the nanosecond, where psutil's user+system move in 10 ms ticks (+-4 us a frame
        over a ~130 ms round at 5,000 sockets). A thread that ended is not in the sum."""
        base = f"/proc/{self.proc.pid}"
        with open(f"{base}/schedstat") as f:
            main = int(f.read().split()[0])
        total = 0
        for tid in os.listdir(f"{base}/task"):
            with contextlib.suppress(OSError), open(f"{base}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        return main, total

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def seed(database_url: str, users: int, audience: int) -> int:
    """Users 1..N, all active, the first `audience` of them following one pull-mode author
    (id N+1)."""
    conn = await asyncpg.connect(provision.asyncpg_url(database_url))
    try:
        await conn.execute("TRUNCATE users RESTART IDENTITY CASCADE")
        await conn.execute(
            """INSERT INTO users (handle, password_hash, display_name, last_active_at)
               SELECT 'bench' || g, 'x', 'bench ' || g, now() FROM generate_series(1, $1) g""",
            users,
        )
        author = await conn.fetchval(
            """INSERT INTO users (handle, password_hash, display_name, fanout_mode,
                                  follower_count, last_active_at)
               VALUES ('celebrity', 'x', 'Celebrity', 1, $1, now()) RETURNING id""",
            users,
        )
        await conn.execute(
            "INSERT INTO follows (follower_id, followee_id) "
            "SELECT g, $1 FROM generate_series(1, $2) g",
            author,
            audience,
        )
        return int(author)
    finally:
        await conn.close()


async def measure(
    n: int,
    server: Server,
    redis: Redis,
    settings: Settings,
    author: int,
    args: argparse.Namespace,
    prepared: bool,
) -> dict[str, Any]:
    notifier = RedisNotifier(redis, settings.model_copy(update={"realtime_namespace": NAMESPACE}))
    clients = Clients()
    audience = min(n, args.audience or n)
    rss0 = server.rss()
    gate = asyncio.Semaphore(100)

    async def one(user_id: int) -> None:
        def on_text(payload: bytes, now: float) -> None:
            if b'"type":"next"' in payload[:48]:
                clients.on_frame(user_id, now)

        token = f"Bearer {issue_token(settings, user_id)}"
        source = source_address(user_id - 1, args.sockets_per_address)
        async with gate:
            ws = await open_lean(
                "127.0.0.1", server.port, token, SUBSCRIBE_MESSAGE, on_text, source=source
            )
        clients.sockets.append(ws)
        if len(clients.sockets) % 5000 == 0:
            elapsed = time.perf_counter() - started
            print(f"  {len(clients.sockets)} sockets in {elapsed:.1f} s", file=sys.stderr)

    server.mark(signal.SIGWINCH)  # profiles: 1.heap (before the sockets)
    server.mark(signal.SIGUSR1)
    server.spy_start("connect")
    started, cpu0, sched0 = time.perf_counter(), server.cpu(), server.sched()
    await asyncio.gather(*(one(u) for u in range(1, n + 1)))
    connect_s = time.perf_counter() - started
    connect_cpu = server.cpu() - cpu0
    connect_sched = [b - a for a, b in zip(sched0, server.sched(), strict=True)]
    server.spy_stop()
    server.mark(signal.SIGUSR2)  # 2.prof: connect
    # The client shares the machine: keep its own full collections (thousands of sockets'
    # objects) out of the latencies it measures.
    gc.collect()
    gc.freeze()
    gc.disable()
    await asyncio.sleep(3)
    rss1 = server.rss()
    server.mark(signal.SIGWINCH)  # 3.heap: the sockets held
    # Warm up both paths (script loads, statement preparation) before timing anything.
    await notifier.delivered(author, [(BASE_POST_ID, int(time.time() * 1000))], [1])
    await notifier.author_posted(author, BASE_POST_ID, int(time.time() * 1000), "public")
    await asyncio.sleep(1.0)

    server.spy_start("idle")
    cpu0, t0 = server.cpu(), time.perf_counter()
    await asyncio.sleep(args.idle_seconds)
    server.spy_stop()
    idle_pct = 100 * (server.cpu() - cpu0) / (time.perf_counter() - t0)

    # Spread: round-robin batches every 10 ms, each batch one worker-style script call.
    rate = max(20, min(1000, n // 5))
    per_tick = max(1, rate // 100)
    ticks = int(args.load_seconds * rate / per_tick)
    order = list(range(1, n + 1))
    post_id, cursor = BASE_POST_ID, 0
    cpu0, t0 = server.cpu(), time.perf_counter()
    for tick in range(ticks):
        target = t0 + tick * per_tick / rate
        await asyncio.sleep(max(0.0, target - time.perf_counter()))
        batch = [order[(cursor + i) % n] for i in range(per_tick)]
        cursor += per_tick
        post_id += 1
        now = time.time()
        for user_id in batch:
            clients.sent_at[user_id] = now
        await notifier.delivered(author, [(post_id, int(now * 1000))], batch)
    await asyncio.sleep(1.0)
    load_pct = 100 * (server.cpu() - cpu0) / (time.perf_counter() - t0)
    spread = list(clients.latencies)
    lost = len(clients.sent_at)
    clients.sent_at.clear()

    # Celebrity: one message, every socket gets a frame.
    celebrity: list[float] = []
    last: list[float] = []
    celebrity_cpu: list[float] = []
    celebrity_system: list[float] = []
    celebrity_sched: list[list[int]] = []  # per round: main thread ns, all threads ns
    lost_celebrity = 0
    server.mark(signal.SIGUSR1)
    server.spy_start("rounds")
    for _ in range(args.rounds):
        await asyncio.sleep(1.0)
        clients.latencies.clear()
        post_id += 1
        now = time.time()
        clients.sent_at.update(dict.fromkeys(range(1, audience + 1), now))
        clients.all_in.clear()
        cpu0, sched0, sys0 = server.cpu(), server.sched(), server.system_cpu()
        await notifier.author_posted(author, post_id, int(now * 1000), "public")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(clients.all_in.wait(), 60)
        celebrity_cpu.append(server.cpu() - cpu0)
        celebrity_system.append(server.system_cpu() - sys0)
        celebrity_sched.append([b - a for a, b in zip(sched0, server.sched(), strict=True)])
        celebrity += clients.latencies
        last.append(max(clients.latencies, default=float("nan")))
        lost_celebrity += len(clients.sent_at)
        clients.sent_at.clear()
    server.spy_stop()
    server.mark(signal.SIGUSR2)  # 4.prof: celebrity rounds (with their 1 s pauses)

    dropped = await server.metric("feed_realtime_subscribers_dropped_total")
    for ws in clients.sockets:
        ws.close()
    gc.enable()
    gc.unfreeze()
    return {
        "frames": "prepared" if prepared else "strawberry",
        "subscribers": n,
        "audience": audience,
        "connect_s": round(connect_s, 1),
        "connect_cpu_ms_per_socket": round(1000 * connect_cpu / n, 2),
        # The scheduler's figures (Server.sched): main thread / all threads.
        "connect_sched_ms_per_socket": "/".join(f"{ns / 1e6 / n:.2f}" for ns in connect_sched),
        "connect_retries": sum(ws.retries for ws in clients.sockets),
        "rss_per_socket_kb": round((rss1 - rss0) / n / 1024, 1),
        "server_rss_mb": round(rss1 / 2**20),
        "idle_cpu_pct": round(idle_pct, 2),
        "spread_rate_per_s": rate,
        "spread_cpu_pct": round(load_pct, 1),
        "spread_p50_ms": round(1000 * percentile(spread, 0.5), 1),
        "spread_p99_ms": round(1000 * percentile(spread, 0.99), 1),
        "celebrity_p50_ms": round(1000 * percentile(celebrity, 0.5), 1),
        "celebrity_p99_ms": round(1000 * percentile(celebrity, 0.99), 1),
        "celebrity_last_ms": round(1000 * statistics.median(last), 1),
        "celebrity_last_max_ms": round(1000 * max(last), 1),
        "celebrity_cpu_ms": round(1000 * statistics.median(celebrity_cpu), 1),
        # The kernel's share of the rounds' server CPU (psutil's system time).
        "celebrity_system_share": round(sum(celebrity_system) / max(sum(celebrity_cpu), 1e-9), 2),
        "cpu_us_per_frame": round(1e6 * statistics.median(celebrity_cpu) / audience, 1),
        # Over every round's CPU at once: psutil's 10 ms ticks weigh less than per round.
        "cpu_us_per_frame_all": round(
            1e6 * sum(celebrity_cpu) / (audience * len(celebrity_cpu)), 1
        ),
        # The same from the scheduler's nanoseconds (Server.sched), all rounds: main thread /
        # all threads; and each round's all-threads figure.
        "sched_us_per_frame_all": "/".join(
            f"{sum(r[i] for r in celebrity_sched) / 1e3 / (audience * len(celebrity_sched)):.2f}"
            for i in (0, 1)
        ),
        "sched_us_per_frame_each": "/".join(
            f"{r[1] / 1e3 / audience:.1f}" for r in celebrity_sched
        ),
        "celebrity_last_each_ms": "/".join(f"{1000 * x:.0f}" for x in last),
        "lost_spread": lost,
        "lost_celebrity": lost_celebrity,
        "dropped": dropped,
    }


def source_address(index: int, per_address: int) -> str:
    """The loopback address the index-th client socket connects from: 127.0.0.2 for the
    first `per_address`, then 127.0.0.3, ... (all of 127/8 reaches loopback). Never
    127.0.0.1: other processes' ephemeral ports there do not collide with ours."""
    k = 2 + index // per_address
    if k > 254:
        raise ValueError("more sockets than 253 source addresses hold: raise the per-address count")
    return f"127.0.0.{k}"


async def main(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.subscribers.split(",")]
    # One descriptor per socket on each side (the server subprocess inherits the limit),
    # plus the server's own (database, Redis, ...): where the hard limit cannot be raised
    # (20,000 in this sandbox: no CAP_SYS_RESOURCE) N is held under it, and the reason said.
    limit = raise_open_files()
    print(f"note: {limit.describe()}", file=sys.stderr)
    room = limit.sockets
    if max(sizes) > room:
        print(f"note: sizes capped at {room:,} sockets (the open-file limit)", file=sys.stderr)
        sizes = [min(n, room) for n in sizes]
    env = provision.ensure_services()
    db_name = args.db_name
    database_url = await provision.acreate_database(env["DATABASE_URL"], db_name, replace=True)
    await asyncio.to_thread(provision.migrate, database_url)
    redis_url = scratch_redis_url(with_redis_db(env["REDIS_URL"], args.redis_db))
    server_env = {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "SECRET_KEY": SECRET,
        "REALTIME_NAMESPACE": NAMESPACE,
        # Every socket comes from loopback: the per-address caps (decision 0017) are off.
        "REALTIME_SOCKETS_PER_IP": "0",
        "REALTIME_SUBSCRIPTIONS_PER_IP": "0",
        "REALTIME_SUBSCRIBES_PER_IP_PER_MINUTE": "0",
    }
    settings = Settings(database_url=database_url, redis_url=redis_url, secret_key=SECRET)
    redis = Redis.from_url(redis_url)
    results = []
    try:
        for n in sizes:
            author = await seed(database_url, n, min(n, args.audience or n))
            for variant in args.frames.split(","):
                if variant == "strawberry" and n > args.stock_max:
                    continue
                prepared = variant == "prepared"
                await redis.flushdb()
                env = {**server_env, "REALTIME_PREPARED_FRAMES": "1" if prepared else "0"}
                profile_dir = (
                    os.path.join(args.profile_dir, f"{variant}-{n}") if args.profile_dir else None
                )
                spy_dir = os.path.join(args.spy_dir, f"{variant}-{n}") if args.spy_dir else None
                server = Server(
                    env,
                    deflate=not args.no_deflate,
                    profile_dir=profile_dir,
                    spy=args.spy,
                    spy_dir=spy_dir,
                )
                try:
                    await server.ready()
                    result = await measure(n, server, redis, settings, author, args, prepared)
                finally:
                    server.stop()
                results.append(result)
                print(json.dumps(result), flush=True)
    finally:
        await redis.aclose()
        await provision.adrop_database(env["DATABASE_URL"], db_name)
    keys = list(results[0])
    print("\n| " + " | ".join(keys) + " |")
    print("|" + " --- |" * len(keys))
    for r in results:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", default="1000,5000,20000")
    parser.add_argument(
        "--frames",
        default="prepared,strawberry",
        help="per-frame paths to compare: prepared (app.api.fast.live_frames) and strawberry (stock)",
    )
    parser.add_argument(
        "--stock-max", type=int, default=5000, help="largest N the strawberry path runs at"
    )
    parser.add_argument("--rounds", type=int, default=5, help="celebrity broadcast rounds")
    parser.add_argument(
        "--audience",
        type=int,
        default=0,
        help="followers of the celebrity (the first A users; 0: all N): issue 38's broadcast "
        "to 20,000 of 50,000 sockets",
    )
    parser.add_argument(
        "--sockets-per-address",
        type=int,
        default=20_000,
        help="client sockets per loopback source address (under the ephemeral port range)",
    )
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--load-seconds", type=float, default=10.0)
    parser.add_argument(
        "--no-deflate", action="store_true", help="server without permessage-deflate"
    )
    parser.add_argument(
        "--redis-db", type=int, default=REDIS_DB, help="Redis database (FLUSHED) to run in"
    )
    parser.add_argument("--db-name", default=DB_NAME, help="scratch database (re-created)")
    parser.add_argument(
        "--profile-dir",
        help="profile the server (benchmarks/profile_hook): cProfile of the connect phase "
        "(2.prof) and of the celebrity rounds (4.prof); heap snapshots before and after the "
        "connects (1.heap, 3.heap) when PYTHONTRACEMALLOC is set",
    )
    parser.add_argument(
        "--spy",
        help="a py-spy binary: sample the server during the connects, the idle phase and the "
        "celebrity rounds (raw profiles in --spy-dir; shares: benchmarks.profile_hook.spy_shares)",
    )
    parser.add_argument("--spy-dir", default="/tmp/subscribers-spy")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(uvloop.run(main(parse(sys.argv[1:]))))
