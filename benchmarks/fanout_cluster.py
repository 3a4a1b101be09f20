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

Issue 38 (decision 0089): the cluster's insert is one call per node (keys in ARGV,
`allow-cross-slot-keys`), the nodes in parallel; `cluster/slot` is the path before it (one
script call per slot, pipelined per node), kept here as the baseline. `+counts` rows run the
fused page (`push_with_tails` with the live counts' tail, `--online` of the followers marked
online, as a FanoutBatch sends it). Every variant runs in every round, interleaved. Besides
the one client's wall rate, each row gives the servers' capacity per node by CPU: the inserts
a node did over its CPU seconds (one client cannot load three nodes on a shared 2-core
machine, so the wall rate per node measures the client); `x plain/node` compares that with
the plain server's.

    python -m benchmarks.fanout_cluster [--followers 20000] [--posts 5] [--fill 400]
        [--online 0.05] [--replicated]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from app.config import Settings
from app.posts.ids import EPOCH_MS
from app.realtime.batch_counts import count_tail, counted
from app.realtime.counts import mark_online
from app.realtime.keys import count_key
from app.redis_client import Cluster
from app.timelines import packed
from app.timelines.scripts import FORMAT_BYTE, PUSH_MANY
from app.timelines.store import TimelineStore, timeline_key, timeline_keys
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
    shares: list[int] | None = None  # inserts per node (None: even)

    def capacity(self) -> float:
        """Inserts per CPU second of the busiest node (per node by CPU)."""
        shares = self.shares or [self.inserts // self.nodes] * self.nodes
        return min(n / c for n, c in zip(shares, self.cpu, strict=True) if c > 0)

    def row(self, base: Figure) -> str:
        rate = self.inserts / self.seconds
        per_node = rate / self.nodes
        cpu_total = sum(self.cpu) / self.inserts * 1e6
        cpu_nodes = " / ".join(f"{c / self.inserts * 1e6:.2f}" for c in self.cpu)
        return (
            f"{self.target:<16} {self.nodes:>5} {rate:>10,.0f} "
            f"{rate / (base.inserts / base.seconds):>6.2f} {per_node:>10,.0f} "
            f"{self.capacity():>12,.0f} {self.capacity() / base.capacity():>12.2f} "
            f"{cpu_total:>9.2f}   {cpu_nodes}"
        )


class SlotStore(TimelineStore):
    """The store before decision 0089 on a cluster: one script call per slot, pipelined."""

    async def _push_on_nodes(self, keys: Sequence[bytes], args: Sequence[Any]) -> int:
        results = await self._eval_batches(PUSH_MANY, self._batches(keys), args)
        return sum(int(r) for r in results)


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


def _shares(client: Redis | RedisCluster, nodes: Sequence[Redis], users: list[int]) -> list[int]:
    """How many of the users' timelines each node serves."""
    if not isinstance(client, RedisCluster):
        return [len(users)]
    where = {(n.connection_pool.connection_kwargs["port"]): i for i, n in enumerate(nodes)}
    shares = [0] * len(nodes)
    for key in timeline_keys(users):
        shares[where[int(client.get_node_from_key(key).port)]] += 1
    return shares


async def run(
    target: str,
    client: Redis | RedisCluster,
    nodes: Sequence[Redis],
    args: argparse.Namespace,
    wait_replicas: int | None = None,
    *,
    store_class: type[TimelineStore] = TimelineStore,
    counts: bool = False,
) -> Figure:
    """`wait_replicas` None: no replicas; else (0 too) the replicas catch up with the fill
    before the clock starts, so that neither variant pays for replicating it. `counts`: the
    fused page (`push_with_tails` with the live counts' tail), `--online` of the followers
    marked online."""
    store = store_class(client, 800, 200)
    settings = Settings()
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
    online: set[int] = set()
    if counts:
        step = max(1, round(1 / args.online)) if args.online > 0 else 0
        online = set(users[::step]) if step else set()
        await mark_online(client, sorted(online), settings)
    before = await _cpu(nodes)
    started = time.perf_counter()
    added = 0
    for post_id, ms in posts:
        for i in range(0, len(users), BATCH):
            page = users[i : i + BATCH]
            if counts:
                guessed = [u for u in page if u in online]
                tail = count_tail(
                    client, post_id, ms, page, guessed, settings, author_id=1, counting=True
                )
                added += await store.push_with_tails(post_id, ms, page, [tail])
                assert counted(tail, page)[1] == [], "an online follower went uncounted"
                continue
            added += await store.push_to_timelines(post_id, ms, page)
            if wait_replicas:  # what FanoutService.deliver does after a batch's writes
                await store.confirm_replicated(users[i : i + BATCH], wait_replicas, WAIT_MS)
    seconds = time.perf_counter() - started
    after = await _cpu(nodes)
    assert added == args.posts * args.followers, added
    for u in online:  # the next round counts afresh
        await client.delete(count_key(u))
    cpu = [a - b for a, b in zip(after, before, strict=True)]
    shares = [s * args.posts for s in _shares(client, nodes, users)]
    return Figure(target, len(nodes), added, seconds, cpu, shares)


async def main(args: argparse.Namespace) -> None:
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(plain_server())
        seed = await stack.enter_async_context(local_cluster(3))
        plain = Redis.from_url(url)
        stack.push_async_callback(plain.aclose)
        cluster = Cluster.from_url(seed)
        stack.push_async_callback(cluster.aclose)
        await cluster.initialize()
        nodes = [Redis(host=n.host, port=int(n.port)) for n in cluster.get_primaries()]
        for n in nodes:
            stack.push_async_callback(n.aclose)
        with_replicas = masters = None
        if args.replicated:
            replicated = await stack.enter_async_context(ClusterTopology(masters=3))
            with_replicas = RedisCluster.from_url(replicated.url.replace("redis+cluster", "redis"))
            stack.push_async_callback(with_replicas.aclose)
            await with_replicas.initialize()
            masters = [m.client for m in replicated.masters]
        figures: list[list[Figure]] = []
        for r in range(args.rounds):
            row = [await run("plain", plain, [plain], args)]
            # The cluster's variants in an order that turns each round.
            variants = [
                ("cluster/node", {}),
                ("cluster/slot", {"store_class": SlotStore}),
                ("plain+counts", {"counts": True}),
                ("cluster+counts", {"counts": True}),
            ]
            variants = variants[r % len(variants) :] + variants[: r % len(variants)]
            found = {}
            for name, kw in variants:
                on_plain = name.startswith("plain")
                found[name] = await run(
                    name, plain if on_plain else cluster, [plain] if on_plain else nodes, args, **kw
                )  # type: ignore[arg-type]
            row += [found[n] for n in ("cluster/node", "cluster/slot", "plain+counts")]
            row.append(found["cluster+counts"])
            if with_replicas is not None and masters is not None:
                order = (0, 1) if r % 2 == 0 else (1, 0)
                waits = {w: await run(f"wait {w}", with_replicas, masters, args, w) for w in order}
                row += [waits[0], waits[1]]
            figures.append(row)
    print(
        f"{args.posts} posts x {args.followers:,} timelines of {args.fill} entries, "
        f"batches of {BATCH}, one client; +counts: {args.online:.0%} of them online; "
        f"'wait 0' / 'wait 1': the cluster with a replica per master, WAIT off / on "
        f"({WAIT_MS} ms timeout); load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'target':<16} {'nodes':>5} {'inserts/s':>10} {'x plain':>6} {'per node/s':>10}"
        f" {'ins/CPU-s/node':>12} {'x plain/node':>12} {'CPU us/ins':>9}   per node"
    )
    for r, row in enumerate(figures, 1):
        for f in row:
            print(f.row(row[3] if f.target == "cluster+counts" else row[0]))
        if len(row) > 5:
            off, on = row[5], row[6]
            rate = (on.inserts / on.seconds) / (off.inserts / off.seconds)
            cpu = (sum(on.cpu) / on.inserts) / (sum(off.cpu) / off.inserts)
            print(
                f"round {r}: WAIT on / off: inserts/s x{rate:.2f}, masters' CPU/insert x{cpu:.2f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--followers", type=int, default=20_000)
    parser.add_argument("--posts", type=int, default=5)
    parser.add_argument("--fill", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--online", type=float, default=0.05, help="share online (+counts)")
    parser.add_argument("--replicated", action="store_true", help="also the WAIT variants")
    asyncio.run(main(parser.parse_args()))
