"""A private PostgreSQL for the tests that stop or restart it: initdb + pg_ctl in a temporary
folder on a free port, migrated, deleted after (the shared server is never touched).

    with private_postgres() as pg:
        async with ApiServer(env={"DATABASE_URL": pg.url}) as api: ...
        pg.stop(); pg.start(); pg.restart()
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools import provision
from tests.servers import free_port


def run_as_pg(argv: list[str], cwd: Path) -> None:
    """A PostgreSQL tool, as provision's system user when we are root (initdb refuses root)."""
    user = provision._pg_system_user()
    kwargs: dict[str, Any] = {}
    if user is not None:
        uid, gid = provision._uid_gid(user)
        kwargs.update(user=uid, group=gid, extra_groups=[])
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            text=True,
            **kwargs,
        )
        out.seek(0)
        assert proc.returncode == 0, f"{argv[0]} failed:\n{out.read()}"


@dataclass
class PrivatePostgres:
    url: str
    ctl: list[str]
    folder: Path

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: sessions are ended, the server is down for a moment."""
        run_as_pg([*self.ctl, "-m", "fast", "restart"], self.folder)

    def stop(self) -> None:
        """`pg_ctl stop -m fast`: sessions are ended, nothing listens on the port until
        `start` (connects are refused)."""
        run_as_pg([*self.ctl, "-m", "fast", "stop"], self.folder)

    def start(self) -> None:
        run_as_pg([*self.ctl, "start"], self.folder)


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """initdb + pg_ctl start on a free port in a temporary folder (the shared server is never
    touched). Stopped and deleted after."""
    bindir = provision._pg_bindir()
    folder = Path(tempfile.mkdtemp(prefix="faults-pg-"))
    try:
        yield from _run_private_postgres(bindir, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_private_postgres(bindir: Path, folder: Path) -> Iterator[PrivatePostgres]:
    folder.chmod(0o755)
    data = folder / "data"
    data.mkdir(mode=0o700)
    (folder / "log").touch()
    user = provision._pg_system_user()
    if user is not None:
        provision._allow_traversal(bindir)
        uid, gid = provision._uid_gid(user)
        for path in (data, folder / "log"):
            os.chown(path, uid, gid)
    port = free_port()
    options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories=''"
    ctl = [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w", "-o", options]
    run_as_pg(
        [
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        ],
        folder,
    )
    run_as_pg([*ctl, "start"], folder)
    try:
        provision.migrate(f"postgresql://postgres@127.0.0.1:{port}/postgres")
        yield PrivatePostgres(f"postgresql://postgres@127.0.0.1:{port}/postgres", ctl, folder)
    finally:
        with suppress(AssertionError):
            run_as_pg([*ctl, "-m", "immediate", "stop"], folder)
