"""Live updates' pub/sub: a plain server against a 3-master Redis Cluster, classic PUBLISH
(decision 0040) and sharded SPUBLISH (decision 0090), and a 1-master cluster both ways (the
"one node" of decision 0040's ratios), in interleaved rounds of one run.

The servers are started on loopback from the embedded server (tests/cluster_topology.py's
plain server, tests/timelines/local_cluster.py's cluster). Each variant publishes
`--messages` messages to `--channels` user channels named as the app names them
(app.realtime.keys.Channels: `fu:bench:u:<id>`, on a cluster `fu:bench:u:{<id>}`, the user's
slot), pipelined `--batch` at a time from one client, to the app's own subscriber
(app.realtime.pubsub: `Listener` on the plain server and for classic on the cluster, one
connection on the seed node as the hub had; `ShardedListener`, a connection per shard, for
sharded). Messages of both are sent to each channel's shard (per-node pipelines), where the count scripts run
and publish.

It prints messages/s (publish until the last message was received) and the servers' CPU per
message summed over every node (INFO cpu before and after), and the ratio of each variant's
CPU per message to the plain server's and to the 1-node cluster's of the same round: the
target of issue 38 is sharded on the 3-node cluster <= 1.3x one node's.

Each variant's servers are also measured idle right after its publishing, for as long (up to
--idle-seconds): a cluster node spends CPU with no message at all (its cron, the cluster
bus's pings), three nodes three times one's, and over a round of ~2 s that is a share of
the CPU per message that does not grow with the messages. The "net" columns take it off:
the CPU the messages themselves cost, the figure that scales with the load.

    python -m benchmarks.pubsub_cluster [--messages 100000] [--channels 1000] [--batch 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from app.realtime.keys import Channels
from app.realtime.pubsub import Listener, ShardedListener
from tests.cluster_topology import plain_redis
from tests.timelines.local_cluster import local_cluster

MESSAGE = "3:1733000000000:1733000000000"


@dataclass
class Figure:
    variant: str
    round: int
    messages: int
    seconds: float
    cpu_seconds: float
    idle_cpu_seconds: float  # the same servers' CPU over as long with no message

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    @property
    def cpu_us_per_message(self) -> float:
        return self.cpu_seconds / self.messages * 1e6

    @property
    def net_cpu_us_per_message(self) -> float:
        return (self.cpu_seconds - self.idle_cpu_seconds) / self.messages * 1e6


def _cpu(clients: Sequence[redis.Redis]) -> float:
    total = 0.0
    for client in clients:
        info = client.info("cpu")
        total += float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    return total


def _slot_owner(clients: Sequence[redis.Redis]) -> dict[int, int]:
    """slot -> index of the node holding it."""
    ports = [int(c.connection_pool.connection_kwargs["port"]) for c in clients]
    owner: dict[int, int] = {}
    for start, end, primary, *_ in clients[0].execute_command("CLUSTER", "SLOTS"):
        for slot in range(int(start), int(end) + 1):
            owner[slot] = ports.index(int(primary[1]))
    return owner


class Subscriber:
    """The app's listener, run on an event loop of its own thread; counts what it hears."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.heard = 0
        self.expected = 0
        self.done = threading.Event()
        self.listener: Any = None
        self.task: Any = None

    def _on_message(self, message: dict[str, Any]) -> None:
        self.heard += 1
        if self.heard >= self.expected:
            self.done.set()

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(120)

    async def _open(self, client: Redis | RedisCluster, channels: list[str]) -> None:
        if isinstance(client, RedisCluster):
            self.listener = ShardedListener(client, lambda c: True, self._on_message, lambda: None)
        else:
            self.listener = Listener(
                client, "fu:bench:hub", lambda c: True, self._on_message, lambda: None
            )
        self.listener.open()
        self.task = asyncio.create_task(self.listener.read_loop())
        for at in range(0, len(channels), 500):
            await self.listener.join_many(channels[at : at + 500])

    async def _close(self) -> None:
        self.listener.running = False
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.listener.close()

    def open(self, client: Redis | RedisCluster, channels: list[str]) -> None:
        self.run(self._open(client, channels))

    def expect(self, n: int) -> None:
        self.heard, self.expected = 0, n
        self.done.clear()

    def close(self) -> None:
        self.run(self._close())

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def run_variant(
    variant: str,
    round_: int,
    ports: Sequence[int],
    sub: Subscriber,
    channels: Channels,
    args: argparse.Namespace,
) -> Figure:
    """Publish every message once (the subscriber already joined every channel)."""
    clients = [redis.Redis(port=p, protocol=2) for p in ports]
    names = [channels.user(i) for i in range(args.channels)]
    cluster = variant != "plain"
    owner = _slot_owner(clients) if cluster else {}
    node_of = [owner[key_slot(n.encode())] if cluster else 0 for n in names]
    plan = [(names[i % args.channels], node_of[i % args.channels]) for i in range(args.messages)]
    sub.expect(args.messages)
    pipes = [c.pipeline(transaction=False) for c in clients]
    before = _cpu(clients)
    started = time.perf_counter()
    for at in range(0, args.messages, args.batch):
        used = set()
        for channel, node in plan[at : at + args.batch]:
            pipes[node].execute_command(channels.publish_command, channel, MESSAGE)
            used.add(node)
        for node in used:
            pipes[node].execute()
    if not sub.done.wait(120):
        raise RuntimeError(f"{variant}: heard {sub.heard} of {args.messages}")
    seconds = time.perf_counter() - started
    cpu = _cpu(clients) - before
    idle_for = min(seconds, args.idle_seconds)
    idle_before = _cpu(clients)
    time.sleep(idle_for)
    idle = (_cpu(clients) - idle_before) * seconds / idle_for
    for client in clients:
        client.close()
    return Figure(variant, round_, args.messages, seconds, cpu, idle)


async def main(args: argparse.Namespace) -> None:
    async with plain_redis() as plain, local_cluster(1) as one, local_cluster(3) as url:
        plain_port = int(plain.connection_pool.connection_kwargs["port"])
        one_port = int(one.split(":")[2].split("/")[0])
        seed = int(url.split(":")[2].split("/")[0])
        probe = redis.Redis(port=seed)
        slots = probe.execute_command("CLUSTER", "SLOTS")
        probe.close()
        cluster_ports = [seed, *sorted({int(s[2][1]) for s in slots} - {seed})]
        classic, sharded = Channels("bench", sharded=False), Channels("bench", sharded=True)
        names = {c.sharded: [c.user(i) for i in range(args.channels)] for c in (classic, sharded)}
        # One subscriber per variant, each on its own client, joined once for every round.
        setups: list[tuple[str, list[int], Channels, Subscriber, Any]] = []
        for variant, ports, chans in (
            ("plain", [plain_port], classic),
            ("1-node classic", [one_port], classic),
            ("1-node sharded", [one_port], sharded),
            ("3-node classic", cluster_ports, classic),
            ("3-node sharded", cluster_ports, sharded),
        ):
            if chans.sharded:
                client: Any = RedisCluster(host="127.0.0.1", port=ports[0], protocol=2)
            else:  # the hub's classic path: one connection, on one (the seed) node
                client = Redis(port=ports[0], protocol=2)
            sub = Subscriber()
            sub.open(client, names[chans.sharded])
            setups.append((variant, ports, chans, sub, client))
        figures: list[Figure] = []
        for round_ in range(1, args.rounds + 1):
            for variant, ports, chans, sub, _ in setups:
                figures.append(
                    await asyncio.to_thread(run_variant, variant, round_, ports, sub, chans, args)
                )
        report(figures, args)
        for _, _, _, sub, client in setups:
            sub.close()
            sub.run(client.aclose())  # on the loop its connections belong to
            sub.stop()


def report(figures: list[Figure], args: argparse.Namespace) -> None:
    gross = {(f.variant, f.round): f.cpu_us_per_message for f in figures}
    net = {(f.variant, f.round): f.net_cpu_us_per_message for f in figures}
    print(
        f"{'variant':<16} {'round':>5} {'msgs/s':>9} {'CPU us/msg':>11} {'x plain':>8} "
        f"{'x 1-node classic':>17} {'idle us/msg':>12} {'net us/msg':>11} {'net x 1-node':>13}"
    )
    for f in figures:
        one = ("1-node classic", f.round)
        print(
            f"{f.variant:<16} {f.round:>5} {f.per_second:>9,.0f} {f.cpu_us_per_message:>11.2f} "
            f"{f.cpu_us_per_message / gross['plain', f.round]:>8.2f} "
            f"{f.cpu_us_per_message / gross[one]:>17.2f} "
            f"{f.cpu_us_per_message - f.net_cpu_us_per_message:>12.2f} "
            f"{f.net_cpu_us_per_message:>11.2f} {f.net_cpu_us_per_message / net[one]:>13.2f}"
        )
    print()
    for label, cpu in (("CPU", gross), ("net CPU", net)):
        for variant in ("3-node classic", "3-node sharded"):
            for base in ("plain", "1-node classic", "1-node sharded"):
                ratios = [cpu[variant, r] / cpu[base, r] for r in range(1, args.rounds + 1)]
                print(
                    f"{variant}: {label} per message {min(ratios):.2f}-{max(ratios):.2f}x "
                    f"{base}'s (median {statistics.median(ratios):.2f}x)"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--channels", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=2.0)
    asyncio.run(main(parser.parse_args()))
