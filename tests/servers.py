"""The API as `make run` serves it: `uvicorn app.web:app` in a subprocess, for the tests that
need a real server (websockets, a browser, several API processes, a server stopped mid-test).

The process inherits the test environment (tests/conftest.py exported DATABASE_URL, REDIS_URL
and the shrunk thresholds into os.environ) plus `env`. Its port is chosen once, so a stopped
server starts again at the same address (clients see a drop and a recovery). Its output goes
to a log file, quoted when it fails to become healthy.

    async with ApiServer(env={"REALTIME_COALESCE_MS": "0"}) as api:
        async with api.http() as http: ...

Session-wide servers are the `server` fixtures (tests/realtime/conftest.py, tests/e2e).

`npm_ci(folder)` puts a node client's pinned packages in place (its committed
package-lock.json, `npm ci` when node_modules is missing or stale): the graphql-ws reference
client (tests/realtime/reference_client), the graphql-http audit (tests/api/graphql_http_audit)
and the client recipes (tests/clients/apollo).

`redis_server(port, folder)` is `make run`'s Redis (append-only) on a port of a test's own, for
the tests that stop it; `redis_answers(port)` says whether it answers a PING.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

import httpx
import pytest
import redis.asyncio as aioredis
import redis.exceptions

from app.config import PROJECT_ROOT
from devtools import provision
from tests.helpers import eventually, metric_value
from tests.ports import free_port

START_SECONDS = 30.0  # a loaded machine (workers, a browser) starts uvicorn slowly


class ApiServer:
    def __init__(self, env: dict[str, str] | None = None, args: Sequence[str] = ()) -> None:
        self.env = {**os.environ, **(env or {})}
        self.args = list(args)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/graphql"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix="uvicorn-", suffix=".log")[1])

    def start_process(self) -> None:
        """Launch uvicorn (returns at once)."""
        argv = [sys.executable, "-m", "uvicorn", "app.web:app", "--host", "127.0.0.1",
                "--port", str(self.port), "--log-level", "warning", *self.args]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, cwd=PROJECT_ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )

    async def start(self) -> ApiServer:
        """Start the process and return once /healthz answers 200."""
        self.start_process()
        try:
            async with httpx.AsyncClient(base_url=self.url, timeout=1.0) as client:
                await eventually(lambda: self._healthy(client), START_SECONDS, 0.05, "healthy")
        except BaseException:
            self.stop()
            raise
        return self

    async def start_refused(self) -> str:
        """Start the process and wait for it to exit by itself (a start-up that must be
        refused): its log; an AssertionError if it is still running after START_SECONDS.
        Not judged by /healthz: the port was free when chosen, and another test's server
        that took it meanwhile would answer for this one."""
        self.start_process()
        assert self.proc is not None
        try:
            code = await asyncio.to_thread(self.proc.wait, START_SECONDS)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"the start-up was not refused:\n{self.logs()}") from None
        self.proc = None
        return f"uvicorn exited with {code}:\n{self.logs()}"

    async def _healthy(self, client: httpx.AsyncClient) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {self.proc.returncode}:\n{self.logs()}")
        try:
            return (await client.get("/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        """Signal the process and wait for it (killed after `timeout`); its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code, self.proc = self.proc.returncode, None
        return code

    async def __aenter__(self) -> ApiServer:
        return await self.start()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def http(self) -> httpx.AsyncClient:
        """A client of this server (use it as `async with server.http() as http`)."""
        return httpx.AsyncClient(base_url=self.url, timeout=10)

    async def metric(self, name: str, labels: str = "") -> float:
        """One sample from /metrics (0 when absent)."""
        async with self.http() as client:
            text = (await client.get("/metrics")).text
        return metric_value(text, name + (f"{{{labels}}}" if labels else ""), default=0.0)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]


def npm_ci(folder: Path) -> None:
    """A node client's pinned packages in place: `npm ci` in `folder` when its node_modules is
    missing or came from another package-lock.json. Skips the test without node/npm on PATH."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        pytest.skip(f"{folder.name} needs node and npm on PATH")
    lock = folder / "package-lock.json"
    # Written after a successful `npm ci`: the digest of the lock file node_modules came from.
    stamp = folder / "node_modules" / ".installed-lock-sha256"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    with lock.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # concurrent test sessions: one `npm ci` at a time
        installed = stamp.read_text().strip() if stamp.exists() else None
        if installed != digest:
            result = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=300,
            )
            if result.returncode != 0:
                pytest.fail(
                    f"npm ci in {folder} failed ({result.returncode}):\n"
                    f"{result.stdout}\n{result.stderr}"
                )
            stamp.write_text(digest + "\n")


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, up to 15 s to exit, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def redis_server(port: int, folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`make run`'s Redis (append-only file) on its own port."""
    pairs = zip(provision.REDIS_EXTRA_CONFIG[::2], provision.REDIS_EXTRA_CONFIG[1::2], strict=True)
    argv = [
        str(provision._redis_server()),
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--dir",
        str(folder),
        "--save",
        "",
    ]
    argv += [arg for name, value in pairs for arg in (f"--{name}", value)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        stop_process(proc)


async def redis_answers(port: int) -> bool:
    """A PING on 127.0.0.1:`port` answers."""
    client = aioredis.Redis(port=port)
    try:
        return bool(await client.ping())
    except redis.exceptions.ConnectionError:
        return False
    finally:
        await client.aclose()
