"""Pub/sub on a Redis Cluster: classic PUBLISH against sharded SPUBLISH (issue 23, decision
0040), on clusters started on loopback from the embedded server (tests/timelines/
local_cluster.py): one node, then three.

Each variant publishes `--messages` messages to `--channels` user channels
(`fu:bench:u:{<id>}`, hash-tagged like the user's count keys), pipelined `--batch` at a
time from one client, while one subscriber per node holding a channel receives them (classic:
one subscriber on another node than the publisher's, as a hub on any node; sharded: one
SSUBSCRIBE connection per node, to the channels that node owns). It prints messages/s
(publish until the last message was received) and the servers' CPU per message summed over
every node (INFO cpu before and after): classic PUBLISH is copied over the cluster bus to
every node, SPUBLISH stays on the channel's shard.

    python -m benchmarks.pubsub_cluster [--messages 100000] [--channels 1000] [--batch 500]
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis
from redis.crc import key_slot

from tests.timelines.local_cluster import local_cluster


@dataclass
class Figure:
    variant: str
    nodes: int
    messages: int
    seconds: float
    cpu_seconds: float

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds

    @property
    def cpu_us_per_message(self) -> float:
        return self.cpu_seconds / self.messages * 1e6


def _cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _slot_owner(clients: Sequence[redis.Redis]) -> dict[int, int]:
    """slot -> index of the node holding it."""
    ports = [int(c.connection_pool.connection_kwargs["port"]) for c in clients]
    owner: dict[int, int] = {}
    for start, end, primary, *_ in clients[0].execute_command("CLUSTER", "SLOTS"):
        for slot in range(int(start), int(end) + 1):
            owner[slot] = ports.index(int(primary[1]))
    return owner


def _receive(sub: redis.client.PubSub, expected: int, done: threading.Event) -> None:
    got = 0
    while got < expected:
        message = sub.get_message(timeout=5.0)
        if message is None:
            break
        if message["type"] in ("message", "smessage"):
            got += 1
    done.set()


def run(
    url_ports: Sequence[int], sharded: bool, messages: int, channels: int, batch: int
) -> Figure:
    clients = [redis.Redis(port=p) for p in url_ports]
    names = [f"fu:bench:u:{{{i}}}" for i in range(channels)]
    owner = _slot_owner(clients)
    node_of = [owner[key_slot(n.encode())] for n in names]
    per_node = [
        [n for n, o in zip(names, node_of, strict=True) if o == i] for i in range(len(clients))
    ]
    plan = [(names[i % channels], node_of[i % channels]) for i in range(messages)]
    subs, threads, done = [], [], []
    if sharded:
        groups = [(i, chans) for i, chans in enumerate(per_node) if chans]
    else:  # one subscriber for all channels, on another node than the publisher's (node 0)
        groups = [(len(clients) - 1, names)]
    for index, chans in groups:
        sub = clients[index].pubsub()
        if sharded:  # one SSUBSCRIBE per channel: a command's channels must share a slot
            for channel in chans:
                sub.ssubscribe(channel)
        else:
            sub.subscribe(*chans)
        for _ in chans:  # the confirmations
            sub.get_message(timeout=5.0)
        expected = sum(1 for _, o in plan if o == index) if sharded else messages
        event = threading.Event()
        thread = threading.Thread(target=_receive, args=(sub, expected, event), daemon=True)
        subs.append(sub)
        threads.append(thread)
        done.append(event)
    before = sum(_cpu(c) for c in clients)
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    pipes = [c.pipeline(transaction=False) for c in clients]
    for at in range(0, messages, batch):
        used = set()
        for channel, node in plan[at : at + batch]:
            if sharded:
                pipes[node].execute_command("SPUBLISH", channel, "3:1733000000000:1733000000000")
                used.add(node)
            else:
                pipes[0].execute_command("PUBLISH", channel, "3:1733000000000:1733000000000")
                used.add(0)
        for node in used:
            pipes[node].execute()
    for event in done:
        event.wait(60)
    seconds = time.perf_counter() - started
    cpu = sum(_cpu(c) for c in clients) - before
    for sub in subs:
        sub.close()
    for client in clients:
        client.close()
    name = "sharded SPUBLISH" if sharded else "classic PUBLISH"
    return Figure(name, len(clients), messages, seconds, cpu)


async def main(args: argparse.Namespace) -> None:
    figures: list[Figure] = []
    for nodes in (1, 3):
        async with local_cluster(nodes) as url:
            seed = int(url.split(":")[2].split("/")[0])
            probe = redis.Redis(port=seed)
            slots = probe.execute_command("CLUSTER", "SLOTS")
            probe.close()
            others = sorted({int(s[2][1]) for s in slots} - {seed})
            ports = [seed, *others]
            for sharded in (False, True):
                figures.append(
                    await asyncio.to_thread(
                        run, ports, sharded, args.messages, args.channels, args.batch
                    )
                )
    base = figures[0]
    print(f"{'variant':<18} {'nodes':>5} {'msgs/s':>10} {'x 1-node':>9} {'CPU us/msg':>11}")
    for f in figures:
        print(
            f"{f.variant:<18} {f.nodes:>5} {f.per_second:>10,.0f} "
            f"{f.per_second / base.per_second:>9.2f} {f.cpu_us_per_message:>11.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--channels", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=500)
    asyncio.run(main(parser.parse_args()))
