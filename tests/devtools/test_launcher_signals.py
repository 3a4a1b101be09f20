"""`make run` as a person uses it: a separate launcher (its own RUN_DIR, embedded PostgreSQL and
Redis, API, relay, workers) stopped by closing the terminal (SIGHUP), killed outright and
started again, ended by `make stop`; and demo data only where it belongs.

A process belongs to a launcher under test when its environment holds that launcher's RUN_DIR
(every child, grandchild and embedded server inherits it), so "nothing left" is checked on
the whole machine, not on a list the launcher keeps.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import termios
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from app.config import PROJECT_ROOT, asyncpg_url
from devtools import provision
from devtools.launcher import LauncherSettings
from tests.helpers import eventually
from tests.servers import free_port

START_SECONDS = 120.0  # initdb, migrations, demo data, four children on a loaded machine
STOP_SECONDS = 60.0


def processes_of(run_dir: Path) -> dict[int, str]:
    """Live processes (not zombies) of a launcher under test: pid -> command line. Its
    children's environment names `run_dir`; the embedded servers overwrite theirs (process
    titles), but they run in their data directories under `run_dir`."""
    marker = f"RUN_DIR={run_dir}".encode()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        ours = marker in environ or cwd.startswith(f"{run_dir}/")
        if ours and provision._alive(int(entry.name)):
            found[int(entry.name)] = provision._cmdline(int(entry.name))
    return found


class Run:
    """`python -m devtools.launcher run` in its own session, its output in a file."""

    def __init__(self, run_dir: Path, **env: str | None) -> None:
        """`env` overrides the test's environment; a None value unsets the variable."""
        self.run_dir = run_dir
        self.port = free_port()
        base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        merged = {**base, "RUN_DIR": str(run_dir), "PORT": str(self.port), **env}
        self.env = {k: v for k, v in merged.items() if v is not None}
        self.log = run_dir.parent / f"launcher-{uuid.uuid4().hex[:8]}.log"
        self.proc = self.start()

    def start(self) -> subprocess.Popen[bytes]:
        with self.log.open("wb") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "devtools.launcher", "run"],
                cwd=PROJECT_ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # like a terminal's job: its own session
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    async def healthy(self) -> None:
        async def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"launcher exited {self.proc.returncode}:\n{self.output()}")
            try:
                async with httpx.AsyncClient(timeout=2) as http:
                    url = f"http://127.0.0.1:{self.port}/healthz"
                    return (await http.get(url)).status_code == 200
            except httpx.TransportError:
                return False

        await eventually(up, START_SECONDS, 0.2, "the launcher's API answers /healthz")

    async def children_started(self) -> None:
        """Until the launcher starts its children (seeding, or not, is done by then) or exits."""
        await eventually(
            lambda: "started api" in self.output() or self.proc.poll() is not None,
            START_SECONDS,
            0.1,
            "the launcher starts its children",
        )

    async def exited(self) -> int:
        code = await eventually(lambda: self.proc.poll() is not None, STOP_SECONDS, 0.1, "exit")
        assert code
        return int(self.proc.returncode)

    def kill_everything(self) -> None:
        """Test cleanup: whatever is left, by pid (never by name)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in processes_of(self.run_dir):
            with_suppress_kill(pid)


class TerminalRun(Run):
    """The launcher in a terminal (a pseudo-terminal) whose session leader ignores SIGHUP
    and waits, as `make` does: closing the terminal sends SIGHUP to that leader only, so the
    launcher has to notice the hang-up itself."""

    def start(self) -> subprocess.Popen[bytes]:
        self.master, slave = os.openpty()
        script = 'trap "" HUP; "$0" -m devtools.launcher run; exit $?'
        proc = subprocess.Popen(
            ["sh", "-c", script, sys.executable],
            cwd=PROJECT_ROOT,
            env=self.env,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        return proc

    def _drain(self) -> None:
        """Copy the terminal's output to the log (a full pty buffer would block the run)."""
        with self.log.open("ab") as out:
            while True:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    return
                if not chunk:
                    return
                out.write(chunk)
                out.flush()

    def close_terminal(self) -> None:
        os.close(self.master)


def with_suppress_kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def postmaster_pid(run_dir: Path) -> int:
    return int((run_dir / "pg" / "data" / "postmaster.pid").read_text().splitlines()[0])


async def nothing_left(run_dir: Path) -> None:
    await eventually(lambda: not processes_of(run_dir), STOP_SECONDS, 0.1, "no process left")


@pytest.fixture(scope="module")
def run_dir() -> Iterator[Path]:
    """One RUN_DIR for the module: the embedded cluster is made (initdb) once. Not under
    pytest's private tmp dir: as root, provisioning opens the path to PostgreSQL's user."""
    path = Path(tempfile.mkdtemp(prefix="hybridfeed-launcher-")) / "run"
    try:
        yield path
    finally:
        for pid in processes_of(path):
            with_suppress_kill(pid)
        shutil.rmtree(path.parent, ignore_errors=True)


@pytest.mark.parametrize("how", ["sighup", "terminal closed"])
async def test_sighup_stops_everything_it_started(run_dir: Path, how: str) -> None:
    run = Run(run_dir) if how == "sighup" else TerminalRun(run_dir)
    try:
        await run.healthy()
        left = processes_of(run_dir)
        # The API, relay, two workers, PostgreSQL (postmaster and its backends) and Redis.
        assert any("redis-server" in cmd or "valkey-server" in cmd for cmd in left.values()), left
        assert postmaster_pid(run_dir) in left
        assert sum("devtools.launcher" not in cmd for cmd in left.values()) >= 6, left
        # The embedded database got the demo accounts (and the launcher said how to skip).
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{run.port}") as http:
            query = 'mutation { logIn(handle: "alice", password: "demo-password") { token } }'
            body = (await http.post("/graphql", json={"query": query})).json()
        assert body["data"]["logIn"]["token"], body
        if isinstance(run, TerminalRun):
            run.close_terminal()  # its output ends here: the terminal is gone
        else:
            assert "SEED_DEMO=0" in run.output()  # the first start loaded the demo data
            # A worker that dies (as ARQ's do when Redis goes away) is started again.
            [worker] = [p for p, cmd in left.items() if "jobs.worker.WorkerSettings" in cmd]
            os.kill(worker, signal.SIGKILL)

            def worker_back() -> bool:
                now = processes_of(run_dir)
                return any("jobs.worker.WorkerSettings" in c for p, c in now.items() if p != worker)

            await eventually(worker_back, 30, 0.2, "the killed worker is started again")
            assert "worker exited (code -9); restarting in 1 s" in run.output(), run.output()
            run.proc.send_signal(signal.SIGHUP)  # what a shell passes on when it hangs up
        assert await run.exited() == 0, run.output()
        await nothing_left(run_dir)
        if not isinstance(run, TerminalRun):
            assert "stopped embedded postgres, redis" in run.output(), run.output()
    finally:
        run.kill_everything()


async def test_a_killed_run_is_taken_over_and_make_stop_keeps_the_data(run_dir: Path) -> None:
    first = Run(run_dir, SEED_DEMO="0")
    second: Run | None = None
    try:
        await first.healthy()
        postmaster = postmaster_pid(run_dir)
        first.proc.kill()  # no cleanup at all: children die (PDEATHSIG), the servers stay
        first.proc.wait()

        def servers_only() -> bool:
            return set(processes_of(run_dir)) <= {postmaster, *provision_pids(run_dir)}

        try:
            await eventually(servers_only, STOP_SECONDS, 0.1, "only the embedded servers left")
        except AssertionError as failed:
            servers = {postmaster, *provision_pids(run_dir)}
            left = {p: c for p, c in processes_of(run_dir).items() if p not in servers}
            raise AssertionError(f"{failed}; left: {left}") from None
        assert provision._alive(postmaster)

        # The next start takes the leftovers over: same servers, stopped when it ends.
        second = Run(run_dir, SEED_DEMO="0")
        await second.healthy()
        assert postmaster_pid(run_dir) == postmaster
        assert "taking over embedded postgres, redis" in second.output(), second.output()
        # A second `make run` next to a live one refuses to start.
        third = Run(run_dir, SEED_DEMO="0")
        assert await third.exited() == 1
        assert "already running" in third.output(), third.output()
        second.proc.kill()

        # `make stop` ends the killed run's leftovers; the data stays for the next start.
        stop = subprocess.run(  # noqa: ASYNC221 - the launcher's own CLI, bounded by timeout
            [sys.executable, "-m", "devtools.launcher", "stop"],
            cwd=PROJECT_ROOT,
            env=second.env,
            capture_output=True,
            text=True,
            timeout=STOP_SECONDS,
        )
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert "postgres" in stop.stdout and "redis" in stop.stdout, stop.stdout
        await nothing_left(run_dir)
        assert (run_dir / "pg" / "data" / "PG_VERSION").exists()
    finally:
        first.kill_everything()
        if second is not None:
            second.kill_everything()


def provision_pids(run_dir: Path) -> set[int]:
    """PostgreSQL's processes (children of the postmaster) and the Redis server."""
    postmaster = postmaster_pid(run_dir)
    pids = {
        pid
        for pid, cmd in processes_of(run_dir).items()
        if "redis-server" in cmd or "valkey-server" in cmd or _ppid(pid) == postmaster
    }
    return pids


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


async def _users_in(database_url: str) -> int:
    """Users besides the synthetic probe's canaries (app.probe signs its own up)."""
    conn = await asyncpg.connect(asyncpg_url(database_url))
    try:
        query = r"SELECT count(*) FROM users WHERE handle NOT LIKE 'probe\_%'"
        return int(await conn.fetchval(query))
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("seed_demo", "has_users"), [("", False), ("1", False), ("1", True)], ids=str
)
async def test_an_external_database_gets_demo_data_only_when_asked(
    tmp_path: Path, seed_demo: str, has_users: bool
) -> None:
    """Asked or not, a database that already has users keeps them and gets no demo data, and
    the launcher says so (a newcomer reusing a `.run/` would otherwise find no `alice`)."""
    server = os.environ["DATABASE_URL"]
    name = f"t_launcher_{uuid.uuid4().hex[:10]}"
    database_url = await provision.acreate_database(server, name)
    if has_users:
        provision.migrate(database_url)
        conn = await asyncpg.connect(asyncpg_url(database_url))
        try:
            await conn.execute(
                "INSERT INTO users (handle, password_hash, display_name) VALUES ($1, $2, $3)",
                "someone",
                "not-a-hash",
                "Someone",
            )
        finally:
            await conn.close()
    run = Run(
        tmp_path / "run",
        DATABASE_URL=database_url,
        REDIS_URL=os.environ["REDIS_URL"],
        SEED_DEMO=seed_demo,
    )
    try:
        await run.children_started()
        users = await _users_in(database_url)
        run.proc.send_signal(signal.SIGTERM)
        assert await run.exited() == 0, run.output()
    finally:
        run.kill_everything()
        await provision.adrop_database(server, name)
    if has_users:
        assert users == 1, run.output()
        assert "demo data: skipped, the database already has users" in run.output(), run.output()
    elif seed_demo:
        assert users > 0, run.output()
    else:
        assert users == 0, run.output()
        assert "SEED_DEMO=1 make run" in run.output(), run.output()


async def test_a_busy_default_port_moves_the_api_and_says_so(tmp_path: Path) -> None:
    """PORT unset and 8000 taken: the API runs on the next free port and the log names it (the
    docs say 8000; a newcomer must see why the address differs)."""
    default = LauncherSettings.model_fields["port"].default
    server = os.environ["DATABASE_URL"]
    name = f"t_launcher_{uuid.uuid4().hex[:10]}"
    database_url = await provision.acreate_database(server, name)
    with contextlib.ExitStack() as held:
        holder = held.enter_context(socket.socket())
        with contextlib.suppress(OSError):  # already taken by someone else: just as good
            holder.bind((provision.HOST, default))
            holder.listen()
        run = Run(
            tmp_path / "run",
            DATABASE_URL=database_url,
            REDIS_URL=os.environ["REDIS_URL"],
            SEED_DEMO="0",
            PROBE_ENABLED="0",
            PORT=None,
        )
        try:
            await run.children_started()
            run.proc.send_signal(signal.SIGTERM)
            assert await run.exited() == 0, run.output()
        finally:
            run.kill_everything()
            await provision.adrop_database(server, name)
    moved = re.search(rf"port {default} busy: API on (\d+)", run.output())
    assert moved, run.output()
    assert f"API        http://127.0.0.1:{moved[1]}" in run.output(), run.output()


async def test_api_and_fanout_workers_scale_out(run_dir: Path) -> None:
    """API_WORKERS=2 FANOUT_WORKERS=2 (issue 23): two API processes behind the one port and
    two ARQ workers per lane; a post made through one is fanned out and read back."""
    run = Run(run_dir, API_WORKERS="2", FANOUT_WORKERS="2", SEED_DEMO="0", PROBE_ENABLED="0")
    try:
        await run.healthy()
        left = processes_of(run_dir)
        commands = list(left.values())
        assert sum("jobs.worker.WorkerSettings" in c for c in commands) == 2, left
        assert sum("jobs.worker.BigLaneWorkerSettings" in c for c in commands) == 2, left
        # uvicorn's supervisor and its two workers (multiprocessing's spawned children).
        assert sum("spawn_main" in c and "resource_tracker" not in c for c in commands) == 2, left
        for name in ("worker-2", "worker-big-2"):
            assert f"started {name} (pid" in run.output(), run.output()

        suffix = uuid.uuid4().hex[:8]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{run.port}", timeout=10) as http:

            async def call(query: str, token: str | None = None) -> dict[str, object]:
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                body = (await http.post("/graphql", json={"query": query}, headers=headers)).json()
                assert "errors" not in body, body
                return body["data"]

            async def sign_up(handle: str) -> str:
                made = await call(
                    f'mutation {{ signUp(handle: "{handle}", password: "long-enough-pw",'
                    f' displayName: "{handle}") {{ token }} }}'
                )
                return str(made["signUp"]["token"])  # type: ignore[index]

            author = await sign_up(f"a{suffix}")
            reader = await sign_up(f"r{suffix}")
            await call(f'mutation {{ follow(handle: "a{suffix}") {{ handle }} }}', reader)
            made = await call('mutation { createPost(body: "across processes") { id } }', author)
            post_id = made["createPost"]["id"]  # type: ignore[index]

            async def in_feed() -> bool:
                page = await call("{ feed(first: 5) { edges { node { id } } } }", reader)
                return post_id in [e["node"]["id"] for e in page["feed"]["edges"]]  # type: ignore[index]

            await eventually(in_feed, 30, 0.3, "the post in the follower's feed")
        run.proc.send_signal(signal.SIGTERM)
        assert await run.exited() == 0, run.output()
        await nothing_left(run_dir)
    finally:
        run.kill_everything()
