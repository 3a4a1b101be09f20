"""How long a Redis Cluster master's SIGKILL keeps keys from being written (issue 23,
decision 0042): on the keys of the dead master's slots and on the keys of a surviving master,
with `cluster-require-full-coverage` yes (the default) and no, each variant on a fresh 3-master
+ 3-replica cluster (tests/cluster_topology.py, `cluster-node-timeout` 1000 ms), rounds
alternating so both variants see the same machine.

A writer per key (the app's cluster client, app.redis_client.Cluster; one client object
for both keys, as in an app process, or one each) SETs its key every 10 ms, from before the kill until 2 s after the promotion; a key's window is the
longest time without a successful write after the kill (the client's own retries included),
and its failed writes are counted. Promotion: the kill to the replica reporting role master
and every live node cluster_state:ok.

    python -m benchmarks.failover_window [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from dataclasses import dataclass

from redis.asyncio.cluster import ClusterNode
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, RedisError

from app.redis_client import Cluster
from tests.cluster_topology import ClusterTopology

WRITE_EVERY = 0.01


@dataclass
class Window:
    full_coverage: bool
    shared: bool
    promotion: float
    dead_slots: float  # longest gap in writes on a key of the dead master's slots
    live_slots: float  # longest gap in writes on a key of a surviving master
    dead_failed: int
    live_failed: int


def key_on(cluster: ClusterTopology, master_index: int) -> str:
    """A key whose slot the master `master_index` serves."""
    master = cluster.masters[master_index]
    assert master.slots is not None
    return next(
        f"bench:{n}"
        for n in range(100_000)
        if master.slots[0] <= key_slot(f"bench:{n}".encode()) <= master.slots[1]
    )


def cluster_client(cluster: ClusterTopology) -> Cluster:
    return Cluster(
        startup_nodes=[ClusterNode("127.0.0.1", n.port) for n in cluster.nodes],
        socket_timeout=1.0,
        socket_connect_timeout=1.0,
    )


async def one_round(full_coverage: bool, shared: bool) -> Window:
    async with ClusterTopology(masters=3, full_coverage=full_coverage) as cluster:
        client = cluster_client(cluster)
        # The surviving key's writer on the same client object, or on a client of its own.
        other = client if shared else cluster_client(cluster)
        await client.initialize()
        await other.initialize()
        victim = cluster.masters[0]
        keys = {"dead": key_on(cluster, 0), "live": key_on(cluster, 1)}
        done: dict[str, list[float]] = {name: [] for name in keys}
        failed = dict.fromkeys(keys, 0)
        stop = asyncio.Event()

        async def writer(name: str, key: str) -> None:
            writes_with = client if name == "dead" else other
            while not stop.is_set():
                try:
                    await writes_with.set(key, "x")
                    done[name].append(time.monotonic())
                except (RedisError, RedisClusterException, OSError):
                    failed[name] += 1
                await asyncio.sleep(WRITE_EVERY)

        tasks = [asyncio.create_task(writer(n, k)) for n, k in keys.items()]
        await asyncio.sleep(0.5)
        killed_at = time.monotonic()
        before = dict(failed)
        cluster.kill(victim)
        promotion = await cluster.await_failover(victim, 30)
        await asyncio.sleep(2.0)
        stop.set()
        await asyncio.gather(*tasks)
        await client.aclose()
        await other.aclose()

        def gap(name: str) -> float:
            times = [killed_at, *(t for t in done[name] if t > killed_at)]
            return max(b - a for a, b in itertools.pairwise(times))

        return Window(
            full_coverage,
            shared,
            promotion,
            gap("dead"),
            gap("live"),
            failed["dead"] - before["dead"],
            failed["live"] - before["live"],
        )


VARIANTS = [(True, True), (False, True), (False, False)]  # (full coverage, one client)


def label(full: bool, shared: bool) -> str:
    return f"full-coverage {'yes' if full else 'no'}, {'one client' if shared else 'two clients'}"


async def run(rounds: int) -> list[Window]:
    found = []
    for _ in range(rounds):
        for full, shared in VARIANTS:
            found.append(await one_round(full, shared))
            w = found[-1]
            print(
                f"{label(full, shared):36}  promotion {w.promotion:.2f} s  "
                f"dead master's key {w.dead_slots:.2f} s ({w.dead_failed} failed)  "
                f"surviving master's key {w.live_slots:.2f} s ({w.live_failed} failed)",
                flush=True,
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    windows = asyncio.run(run(args.rounds))
    for full, shared in VARIANTS:
        mine = [w for w in windows if (w.full_coverage, w.shared) == (full, shared)]
        live = sum(w.live_slots for w in mine) / len(mine)
        dead = sum(w.dead_slots for w in mine) / len(mine)
        print(
            f"mean, {label(full, shared)}: dead master's key {dead:.2f} s, "
            f"surviving master's key {live:.2f} s ({len(mine)} rounds)"
        )


if __name__ == "__main__":
    main()
