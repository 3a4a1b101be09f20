"""Fan-out inserts on one plain server against a 3-node Redis Cluster, same run (issue 23).

The store-level half of a fan-out (what FanoutBatch jobs do: `TimelineStore.push_to_timelines`
over batches of 1,000 followers) into `--followers` existing timelines of `--fill` entries,
`--posts` posts, on a plain server and on a 3-master cluster started from the same embedded
server binary (tests/timelines/local_cluster.py). On the plain server one script call
carries a batch's 1,000 keys; on the cluster the store groups a batch's keys by slot (one
script call per slot, pipelined per node). Printed: inserts/s (one client, wall time),
inserts/s per node, and the servers' CPU per insert (INFO cpu) per node and summed.

Then the same on a 3-master cluster with a replica each (tests/cluster_topology.py), each
batch's writes confirmed by a replica of every master it wrote to (`TimelineStore.
confirm_replicated`, TIMELINE_WAIT_REPLICAS=1: a mark and WAIT per master, decision 0068)
or not, alternated within each round: `wait 1` over `wait 0` is the WAIT's cost. CPU: the
masters'.

    python -m benchmarks.fanout_cluster [--followers 20000] [--posts 5] [--fill 400]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from app.posts.ids import EPOCH_MS
from app.timelines import packed
from app.timelines.scripts import FORMAT_BYTE
from app.timelines.store import TimelineStore, timeline_key
from tests.cluster_topology import ClusterTopology
from tests.helpers import eventually
from tests.timelines.local_cluster import _free_port, local_cluster, redis_server_binary

BATCH = 1000  # followers per FanoutBatch job (FANOUT_BATCH_SIZE)
WAIT_MS = 1000  # TIMELINE_WAIT_MS (default)


@dataclass
class Figure:
    target: str
    nodes: int
    inserts: int
    seconds: float
    cpu: list[float]  # per node, seconds

    def row(self, base: Figure) -> str:
        rate = self.inserts / self.seconds
        per_node = rate / self.nodes
        cpu_total = sum(self.cpu) / self.inserts * 1e6
        cpu_nodes = " / ".join(f"{c / self.inserts * 1e6:.2f}" for c in self.cpu)
        return (
            f"{self.target:<8} {self.nodes:>5} {rate:>12,.0f} {rate / (base.inserts / base.seconds):>6.2f}"
            f" {per_node:>12,.0f} {cpu_total:>9.2f}   {cpu_nodes}"
        )


@asynccontextmanager
async def plain_server() -> AsyncIterator[str]:
    binary = redis_server_binary()
    assert binary is not None, "no redis-server binary"
    workdir = Path(tempfile.mkdtemp(prefix="redis-plain-"))
    port = _free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    argv += ["--appendonly", "no", "--dir", str(workdir)]
    proc = subprocess.Popen(  # noqa: ASYNC220 - one short-lived server
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    client = Redis(port=port)
    try:

        async def up() -> bool:
            try:
                return bool(await client.ping())
            except OSError:
                return False
            except Exception:  # redis' ConnectionError until the server listens
                return False

        await eventually(up, 30, 0.05, "plain server up")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        await client.aclose()
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


async def _cpu(nodes: Sequence[Redis]) -> list[float]:
    infos = [await n.info("cpu") for n in nodes]
    return [float(i["used_cpu_sys"]) + float(i["used_cpu_user"]) for i in infos]


async def run(
    target: str,
    client: Redis | RedisCluster,
    nodes: Sequence[Redis],
    args: argparse.Namespace,
    wait_replicas: int | None = None,
) -> Figure:
    """`wait_replicas` None: no replicas; else (0 too) the replicas catch up with the fill
    before the clock starts, so that neither variant pays for replicating it."""
    store = TimelineStore(client, 800, 200)
    old_ms = 1_750_000_000_000
    body = FORMAT_BYTE + packed.pack_ids(((old_ms + i - EPOCH_MS) << 22) for i in range(args.fill))
    users = list(range(1, args.followers + 1))
    for i in range(0, len(users), 1000):
        async with client.pipeline(transaction=False) as pipe:
            for u in users[i : i + 1000]:
                pipe.set(timeline_key(u), body)
            await pipe.execute()
    now_ms = int(time.time() * 1000)
    posts = [(((now_ms + i - EPOCH_MS) << 22), now_ms + i) for i in range(args.posts)]
    if wait_replicas is not None:
        await store.confirm_replicated(users, 1, 60_000)
    before = await _cpu(nodes)
    started = time.perf_counter()
    added = 0
    for post_id, ms in posts:
        for i in range(0, len(users), BATCH):
            added += await store.push_to_timelines(post_id, ms, users[i : i + BATCH])
            if wait_replicas:  # what FanoutService.deliver does after a batch's writes
                await store.confirm_replicated(users[i : i + BATCH], wait_replicas, WAIT_MS)
    seconds = time.perf_counter() - started
    after = await _cpu(nodes)
    assert added == args.posts * args.followers, added
    return Figure(
        target, len(nodes), added, seconds, [a - b for a, b in zip(after, before, strict=True)]
    )


async def main(args: argparse.Namespace) -> None:
    async with (
        plain_server() as url,
        local_cluster(3) as seed,
        ClusterTopology(masters=3) as replicated,
    ):
        plain = Redis.from_url(url)
        cluster = RedisCluster.from_url(seed)
        await cluster.initialize()
        nodes = [Redis(host=n.host, port=int(n.port)) for n in cluster.get_primaries()]
        with_replicas = RedisCluster.from_url(replicated.url.replace("redis+cluster", "redis"))
        await with_replicas.initialize()
        masters = [m.client for m in replicated.masters]
        try:
            figures: list[list[Figure]] = []
            for r in range(args.rounds):
                # Which of the two replicated variants runs first alternates by round.
                order = (0, 1) if r % 2 == 0 else (1, 0)
                replicated_figures = {
                    wait: await run(f"wait {wait}", with_replicas, masters, args, wait)
                    for wait in order
                }
                figures.append(
                    [
                        await run("plain", plain, [plain], args),
                        await run("cluster", cluster, nodes, args),
                        replicated_figures[0],
                        replicated_figures[1],
                    ]
                )
        finally:
            await plain.aclose()
            await cluster.aclose()
            await with_replicas.aclose()
            for n in nodes:
                await n.aclose()
    print(
        f"{args.posts} posts x {args.followers:,} timelines of {args.fill} entries, "
        f"batches of {BATCH}, one client; 'wait 0' / 'wait 1': the cluster with a replica "
        f"per master, WAIT off / on ({WAIT_MS} ms timeout)"
    )
    print(
        f"{'target':<8} {'nodes':>5} {'inserts/s':>12} {'x plain':>6} {'per node/s':>12}"
        f" {'CPU us/ins':>9}   per node"
    )
    for r, row in enumerate(figures, 1):
        for f in row:
            print(f.row(row[0]))
        off, on = row[2], row[3]
        rate = (on.inserts / on.seconds) / (off.inserts / off.seconds)
        cpu = (sum(on.cpu) / on.inserts) / (sum(off.cpu) / off.inserts)
        print(
            f"round {r}: WAIT on / off: inserts/s x{rate:.2f}, masters' CPU per insert x{cpu:.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--followers", type=int, default=20_000)
    parser.add_argument("--posts", type=int, default=5)
    parser.add_argument("--fill", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
