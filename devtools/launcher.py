"""One foreground command per README entry: `python -m devtools.launcher run|test|stop`.

`make run`, `make test` and `make stop` call it. Why a Python launcher and not a Procfile
tool: it has to provision Postgres/Redis first (see devtools.provision), migrate and seed, and
then own the shutdown order: children get SIGTERM, then SIGKILL after a grace period, and only
then do the embedded servers that *this* launcher started go down. Servers it found already
running are left alone. Ctrl-C, SIGTERM and SIGHUP (the terminal closed) all stop it so.

Each launcher records what it owns in `.run/owners/<pid>.json` (its children, the embedded
servers it started). A launcher that died without cleaning up (SIGKILL, a crash) leaves that
record behind: the next `run`/`test` stops the leftover children and takes the servers over
(stopping them when it exits), and `stop` stops everything without deleting data.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.api.transports.open_files import OpenFiles, raise_open_files
from app.config import PROJECT_ROOT, SettingsError, asyncpg_url, get_settings
from app.probe.settings import get_probe_settings
from devtools import provision


class LauncherSettings(BaseSettings):
    """`make run`'s own settings: what the launcher starts, not what the service does, so
    apart from the service's `Settings` (decision 0073). Their names are listed in
    app.config.LAUNCHER_VARIABLES for the look-alike check."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", case_sensitive=False)

    port: int = Field(default=8000, ge=1, le=65_535)  # the API's port
    # API processes behind the one port (uvicorn --workers) and ARQ worker processes per
    # lane. Per-process limits (connections per client address, admission slots) then hold
    # per process; the socket caps hold across them (leases).
    api_workers: int = Field(default=1, ge=1, le=64)
    fanout_workers: int = Field(default=1, ge=1, le=64)


@functools.cache
def get_launcher_settings() -> LauncherSettings:
    """PORT, API_WORKERS, FANOUT_WORKERS, read once."""
    return LauncherSettings()


@dataclass
class ProcessSpec:
    """A supervised child. `{python}`, `{port}` and `{max_bytes}` in argv are filled in at
    start; `wanted` (if given) decides at start whether it runs at all."""

    name: str
    argv: list[str]
    wanted: Callable[[], bool] | None = None
    # Started FANOUT_WORKERS times (a lane's ARQ workers), as `name`, `name-2`, ...
    scaled: bool = False

    def command(self, port: int) -> list[str]:
        """The argv to run, placeholders filled in."""
        values = {
            "python": sys.executable,
            "port": port,
            "max_bytes": get_settings().max_request_bytes,
            "api_workers": get_launcher_settings().api_workers,
        }
        return [a.format(**values) for a in self.argv]


Children = list[tuple[ProcessSpec, subprocess.Popen[bytes]]]


def probe_wanted() -> bool:
    """PROBE_ENABLED decides; unset, the probe runs unless PROFILE=production."""
    enabled = get_probe_settings().enabled
    return enabled if enabled is not None else get_settings().profile != "production"


PROCESSES: list[ProcessSpec] = [
    ProcessSpec(
        "api",
        [
            "{python}",
            "-m",
            "uvicorn",
            "app.web:app",
            "--host",
            "127.0.0.1",
            "--port",
            "{port}",
            # ~40% less memory per idle websocket (frames are ~150 bytes anyway), and live
            # frames can be written straight to the socket (app/api/fast/raw_frames.py).
            "--ws-per-message-deflate",
            "false",
            # Websocket messages are bounded like HTTP bodies (MAX_REQUEST_BYTES): uvicorn
            # refuses a bigger one (1009) before buffering it; the app checks again.
            "--ws-max-size",
            "{max_bytes}",
            # A client that never reads must not hold the shutdown forever.
            "--timeout-graceful-shutdown",
            "5",
            # Heads bounded in time and size, connections capped per client address
            # (app/api/transports/connections.py; bodies are bounded by the app, admission.py).
            "--http",
            "app.api.transports.connections:GuardedHttpTools",
            # API_WORKERS processes behind one port (uvicorn's own supervisor when > 1).
            "--workers",
            "{api_workers}",
        ],
    ),
    ProcessSpec("relay", ["{python}", "-m", "jobs.relay"]),
    ProcessSpec("worker", ["{python}", "-m", "arq", "jobs.worker.WorkerSettings"], scaled=True),
    ProcessSpec(
        "worker-big", ["{python}", "-m", "arq", "jobs.worker.BigLaneWorkerSettings"], scaled=True
    ),
    # The synthetic probe (app.probe): canary accounts reading and writing through the API;
    # its metrics reach /metrics like the workers' (PROMETHEUS_MULTIPROC_DIR).
    ProcessSpec(
        "probe",
        ["{python}", "-m", "app.probe", "--url", "http://127.0.0.1:{port}"],
        wanted=probe_wanted,
    ),
]

SEED_COMMAND = [sys.executable, "-m", "devtools.seed", "demo", "--if-empty"]
# SEED_DEMO=1 loads the demo accounts (published password) into any empty database, =0 never;
# unset: only into the embedded database, never into an external DATABASE_URL unasked.
SEED_ENV = "SEED_DEMO"

GRACE_SECONDS = 10.0
POLL_SECONDS = 0.2
# A crashed child is restarted (_Restarts): after 1, 2, 4 ... RESTART_MAX_DELAY seconds;
# more than RESTART_LIMIT crashes of one child within RESTART_WINDOW seconds stop the run.
RESTART_MAX_DELAY = 30.0
RESTART_LIMIT = 8
RESTART_WINDOW = 300.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
OWNERS_DIR = provision.RUN_DIR / "owners"


def log(message: str) -> None:
    # After SIGHUP the terminal is gone: a failed write must not cut the cleanup short.
    with contextlib.suppress(OSError, ValueError):
        print(f"[launcher] {message}", file=sys.stderr, flush=True)


def open_file_limit() -> OpenFiles:
    """Raise this process's open-file limit before any child starts (they inherit it): each
    websocket of the API is a descriptor (decision 0092). Logged, with the reason when the
    hard limit could not be raised."""
    limit = raise_open_files()
    log(limit.describe())
    return limit


# --------------------------------------------------------------------------- owners


def _record_path(pid: int) -> Path:
    return OWNERS_DIR / f"{pid}.json"


def _write_record(command: str, children: Children) -> None:
    """What this launcher owns, for whoever finds it dead later (`stop`, the next start)."""
    OWNERS_DIR.mkdir(parents=True, exist_ok=True)
    record = {
        "pid": os.getpid(),
        "command": command,
        "services": sorted(provision.started_services()),
        "children": [{"name": s.name, "pid": p.pid, "argv": p.args} for s, p in children],
    }
    tmp = _record_path(os.getpid()).with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(_record_path(os.getpid()))


def _drop_record() -> None:
    _record_path(os.getpid()).unlink(missing_ok=True)


def _records() -> list[dict[str, Any]]:
    out = []
    for path in sorted(OWNERS_DIR.glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text())
            if isinstance(record, dict) and isinstance(record.get("pid"), int):
                out.append(record)
    return out


def _launcher_alive(pid: int) -> bool:
    return pid != os.getpid() and _alive(pid) and "devtools.launcher" in _cmdline(pid)


def _alive(pid: int) -> bool:
    return provision._alive(pid)


def _cmdline(pid: int) -> str:
    return provision._cmdline(pid)


def _still_ours(child: dict[str, Any]) -> bool:
    """The recorded child still runs (the pid was not reused by something else)."""
    pid, argv = child.get("pid"), child.get("argv")
    if not isinstance(pid, int) or not isinstance(argv, list) or not _alive(pid):
        return False
    return _cmdline(pid).split() == [str(a) for a in argv]


def _take_over_leftovers() -> list[str]:
    """Stop the children of launchers that died without cleaning up, and adopt the embedded
    servers they started; their names, for the log."""
    found: list[str] = []
    for record in _records():
        pid = record["pid"]
        if pid == os.getpid() or _launcher_alive(pid):
            continue
        for child in record.get("children", []):
            if isinstance(child, dict) and _still_ours(child):
                log(f"stopping {child.get('name')} (pid {child['pid']}) left by launcher {pid}")
                provision._stop_pid(child["pid"], signal.SIGTERM)
                found.append(str(child.get("name")))
        services = [s for s in record.get("services", []) if s in ("postgres", "redis")]
        if services:
            log(f"taking over embedded {', '.join(services)} left running by launcher {pid}")
            provision.adopt_services(services)
            found += services
        _record_path(pid).unlink(missing_ok=True)
    return found


def _live_runs() -> list[int]:
    return [r["pid"] for r in _records() if r.get("command") == "run" and _launcher_alive(r["pid"])]


# --------------------------------------------------------------------------- test


# `make test` with no arguments runs the suite in phases (decision 0074): first every test not
# marked `alone` across TEST_WORKERS pytest-xdist workers (each with a database, a Redis db and
# a pub/sub namespace of its own, tests/conftest.py; a test file's tests stay on one worker,
# the folders tests/conftest.py names as groups go whole to one), then the `alone` ones
# (tests/reliability, and single tests that flush or read server-wide Redis state) in one
# plain pytest process, alone on the machine: they stop and restart servers and measure
# recovery times that other workers' load would stretch. Arguments: one pytest run as given.
WORKERS_ENV = "TEST_WORKERS"


def _test_workers() -> int:
    """TEST_WORKERS, else one more than the CPUs (the tests mostly wait on servers)."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if raw:
        return max(1, int(raw))
    return (os.cpu_count() or 1) + 1


def test_phases(pytest_args: list[str]) -> list[tuple[str, list[str]]]:
    """The pytest runs of `make test`: (name, argv after `pytest`), in order."""
    if pytest_args:
        return [("pytest", list(pytest_args))]
    workers = _test_workers()
    parallel = ["-m", "not alone"]
    if workers > 1:
        parallel = ["-n", str(workers), "--dist", "loadgroup", "--no-loadscope-reorder", *parallel]
    return [(f"parallel ({workers} workers)", parallel), ("alone", ["-m", "alone"])]


def cmd_test(pytest_args: list[str]) -> int:
    """Run pytest against provisioned services, phase by phase (`test_phases`); the first
    failing phase's exit code is ours (later phases still run, so one run shows every
    failure; an interrupted phase stops the rest)."""
    _take_over_leftovers()
    open_file_limit()
    env = provision.ensure_services()
    os.environ.update(env)
    _write_record("test", [])
    current: list[subprocess.Popen[bytes]] = []

    # Ctrl-C reaches pytest directly (same process group) and it prints its summary; we only
    # forward SIGTERM. A no-op handler, not SIG_IGN, so the child does not inherit "ignore".
    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum in (signal.SIGTERM, signal.SIGHUP):
            for proc in current:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)

    for signum in STOP_SIGNALS:
        signal.signal(signum, forward)
    code = 0
    try:
        for name, args in test_phases(pytest_args):
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=PROJECT_ROOT)
            current[:] = [proc]
            result = proc.wait()
            log(f"{name}: exit {result} after {time.monotonic() - started:.0f} s")
            code = code or result
            if result in (2, 3, 4) or result < 0:  # interrupted, internal or usage error
                break
        return code
    finally:
        provision.stop_services(provision.started_services())
        _drop_record()


# --------------------------------------------------------------------------- run


class _Stop:
    """Signal bookkeeping for the supervisor loop (handlers must stay tiny)."""

    def __init__(self) -> None:
        self.requested = 0

    def handler(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested += 1


def _pdeathsig() -> Callable[[], None] | None:
    """preexec_fn: children get SIGTERM if the launcher dies without cleaning up (Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def preexec() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)

    return preexec


def _users_in(database_url: str) -> int:
    import asyncpg

    async def count() -> int:
        conn = await asyncpg.connect(asyncpg_url(database_url))
        try:
            return int(await conn.fetchval("SELECT count(*) FROM users"))
        finally:
            await conn.close()

    return asyncio.run(count())


def _api_port() -> int:
    """PORT when it is set; left unset, the default or the next free port above it, said in
    the log (a second checkout's `make run` should not die on a busy 8000)."""
    settings = get_launcher_settings()
    if "port" in settings.model_fields_set:
        return settings.port
    return provision.free_port_from(settings.port, "API")


def _seed_wanted(external_database: bool) -> bool:
    flag = os.environ.get(SEED_ENV, "").strip().lower()
    if flag in ("1", "true", "yes"):
        return True
    if flag in ("0", "false", "no"):
        return False
    return not external_database


def _seed_if_empty(database_url: str, env: dict[str, str], external_database: bool) -> None:
    """Demo accounts share a published password: only into the embedded database, or asked.
    A database with users is never seeded, and the log says so: someone reusing a `.run/`
    would otherwise look for `alice` without a hint."""
    users = _users_in(database_url)
    if users:
        afresh = (
            "it is left as it is"
            if external_database
            else "`make clean` deletes .run/ and the next `make run` starts afresh"
        )
        log(f"demo data: skipped, the database already has users ({users:,}); {afresh}")
        return
    if not _seed_wanted(external_database):
        where = "the database at DATABASE_URL" if external_database else "the database"
        log(f"{where} is empty and gets no demo data; `{SEED_ENV}=1 make run` loads it")
        return
    log(f"empty database: loading demo data (password demo-password; {SEED_ENV}=0 skips it)")
    subprocess.run(SEED_COMMAND, cwd=PROJECT_ROOT, env=env, check=True)


def _spawn(spec: ProcessSpec, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    argv = spec.command(port)
    # Own process group: the terminal's Ctrl-C reaches only us, so shutdown is ordered.
    proc = subprocess.Popen(
        argv,
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        process_group=0,
        preexec_fn=_pdeathsig(),
    )
    log(f"started {spec.name} (pid {proc.pid}): {' '.join(argv)}")
    return proc


def _wanted_specs() -> list[ProcessSpec]:
    """PROCESSES that run, each lane's worker FANOUT_WORKERS times."""
    copies = get_launcher_settings().fanout_workers
    wanted = []
    for spec in PROCESSES:
        if spec.wanted is not None and not spec.wanted():
            continue
        wanted.append(spec)
        if spec.scaled:
            wanted += [replace(spec, name=f"{spec.name}-{i}") for i in range(2, copies + 1)]
    return wanted


def _start_children(env: dict[str, str], port: int) -> Children:
    return [(spec, _spawn(spec, env, port)) for spec in _wanted_specs()]


class _Restarts:
    """Restart a crashed child after a growing delay (1 s, 2 s, ... up to RESTART_MAX_DELAY):
    an ARQ worker or the relay exits when Redis goes away, and must come back when it does.
    More than RESTART_LIMIT crashes of one child within RESTART_WINDOW is a crash loop:
    everything stops, as before, so a broken build does not spin forever."""

    def __init__(self) -> None:
        self.crashes: dict[str, list[float]] = {}
        self.due: dict[str, float] = {}

    def crashed(self, name: str, now: float) -> bool:
        """Record a crash; False when this child is in a crash loop."""
        recent = [t for t in self.crashes.get(name, []) if now - t < RESTART_WINDOW] + [now]
        self.crashes[name] = recent
        delay = min(RESTART_MAX_DELAY, 2 ** (len(recent) - 1))
        self.due[name] = now + delay
        return len(recent) <= RESTART_LIMIT


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _stop_children(children: Children, stop: _Stop) -> None:
    """SIGTERM every group, wait up to GRACE_SECONDS (a second Ctrl-C cuts it short), SIGKILL."""
    for _, proc in children:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
    already = stop.requested
    deadline = time.monotonic() + GRACE_SECONDS
    while any(proc.poll() is None for _, proc in children):
        if time.monotonic() > deadline or stop.requested > already:
            break
        time.sleep(0.1)
    for spec, proc in children:
        if proc.poll() is None:
            log(f"{spec.name} ignored SIGTERM; killing it")
        _signal_group(proc, signal.SIGKILL)  # also reaps stray grandchildren of exited ones
        proc.wait()


def _terminal_fd() -> int | None:
    """The first of stdin/stdout/stderr on a terminal: a hung-up terminal stops answering
    isatty(), which is how a run whose SIGHUP went elsewhere still notices."""
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                return fd
    return None


def _logs_line() -> str:
    """What the children print (LOG_LEVEL, app.observability.quiet_logs, decision 0085)."""
    settings = get_settings()
    if settings.log_level != "info":
        return f"LOG_LEVEL={settings.log_level}"
    every = settings.log_summary_seconds
    return (
        f"your requests; the probe's, the scrapes and jobs done summed up every {every} s"
        " (LOG_LEVEL=debug: every line)"
    )


def _supervise(env: dict[str, str], port: int, stop: _Stop) -> int:
    children = _start_children(env, port)
    base = f"http://127.0.0.1:{port}"
    lines = [
        f"  API        {base}",
        f"  GraphiQL   {base}/graphql",
        f"  Demo page  {base}/",
        f"  Postgres   {env['DATABASE_URL']}",
        f"  Redis      {env['REDIS_URL']}",
        f"  Logs       {_logs_line()}",
    ]
    _write_record("run", children)
    with contextlib.suppress(OSError, ValueError):
        print("\nhybridfeed is running:\n" + "\n".join(lines) + "\nCtrl-C stops everything.\n")
        sys.stdout.flush()

    code = 0
    terminal = _terminal_fd()
    restarts = _Restarts()
    while not stop.requested:
        now = time.monotonic()
        for i, (spec, proc) in enumerate(children):
            if proc.poll() is None:
                continue
            if spec.name not in restarts.due:
                if not restarts.crashed(spec.name, now):
                    log(f"{spec.name} keeps crashing (code {proc.returncode}); stopping everything")
                    code = 1
                    break
                wait = restarts.due[spec.name] - now
                log(f"{spec.name} exited (code {proc.returncode}); restarting in {wait:.0f} s")
            elif now >= restarts.due[spec.name]:
                del restarts.due[spec.name]
                children[i] = (spec, _spawn(spec, env, port))
                _write_record("run", children)
        if code:
            break
        if terminal is not None and not os.isatty(terminal):
            # Hung up. The kernel sends SIGHUP to the session leader only; when that is `make`
            # (e.g. `script -c 'make run'`), make waits for us instead of passing it on.
            log("the terminal closed; stopping")
            break
        time.sleep(POLL_SECONDS)
    else:
        log("stopping")
    _stop_children(children, stop)
    return code


def cmd_run() -> int:
    """Provision, migrate, seed, then supervise PROCESSES until Ctrl-C/SIGTERM or a crash."""
    # Until supervision starts, SIGTERM and SIGHUP behave like Ctrl-C so the cleanup below
    # still runs.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.default_int_handler)
    stop = _Stop()
    try:
        get_settings()  # bad settings fail here, before anything starts
        get_probe_settings()  # and bad PROBE_* ones
        get_launcher_settings()  # and bad PORT, API_WORKERS, FANOUT_WORKERS
        running = _live_runs()
        if running:
            log(f"`make run` is already running (launcher pid {running[0]}); `make stop` ends it")
            return 1
        _take_over_leftovers()
        open_file_limit()
        port = _api_port()  # after the takeover, which frees a leftover API's port
        external_database = bool(os.environ.get("DATABASE_URL"))
        env = provision.ensure_services()
        _write_record("run", [])
        # Workers and API processes share metrics through prometheus multiprocess files.
        metrics_dir = provision.RUN_DIR / "prometheus"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        child_env = {
            **os.environ,
            **env,
            "PORT": str(port),
            "PYTHONUNBUFFERED": "1",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        }
        provision.migrate(env["DATABASE_URL"])
        _seed_if_empty(env["DATABASE_URL"], child_env, external_database)
        for signum in STOP_SIGNALS:
            signal.signal(signum, stop.handler)
        return _supervise(child_env, port, stop)
    except KeyboardInterrupt:
        return 0
    except (
        provision.ProvisionError,
        subprocess.CalledProcessError,
        ValidationError,
        SettingsError,
    ) as exc:
        log(f"error: {exc}")
        return 1
    finally:
        for signum in STOP_SIGNALS:  # a late Ctrl-C must not skip the cleanup
            signal.signal(signum, signal.SIG_IGN)
        stopped = provision.stop_services(provision.started_services())
        if stopped:
            log("stopped embedded " + ", ".join(stopped))
        _drop_record()


# --------------------------------------------------------------------------- stop


def cmd_stop() -> int:
    """`make stop`: end a running `make run`, a killed run's leftovers and the embedded
    servers; their data stays under .run/ (`make clean` deletes it)."""
    for pid in _live_runs():
        log(f"stopping `make run` (launcher pid {pid})")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS + 2 * provision.STOP_TIMEOUT
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
    _take_over_leftovers()
    stopped = provision.stop_services()
    print("stopped: " + (", ".join(stopped) or "no embedded server was running"))
    print(f"data kept under {provision.RUN_DIR} (`make clean` deletes it)")
    return 0


USAGE = """usage: python -m devtools.launcher run | test [pytest args...] | stop

  run    provision PostgreSQL/Redis (embedded ones under .run/ unless DATABASE_URL/REDIS_URL
         are set), migrate, load the demo data into an empty embedded database (SEED_DEMO=1:
         into any empty database; SEED_DEMO=0: never; a database with users is never
         seeded, and the log says so), then run the API on PORT (default 8000; unset and
         8000 busy: the next free port, logged), the outbox relay, the ARQ workers and the
         synthetic probe (PROBE_ENABLED=0 skips it) until Ctrl-C, SIGTERM or SIGHUP (`make run`)
  test   provision the same way and run pytest with the given arguments; with none, the
         whole suite: the tests not marked `alone` across TEST_WORKERS pytest-xdist workers
         (default: CPUs + 1), then the `alone` ones (tests/reliability, ...) (`make test`)
  stop   stop a running or killed `make run` and the embedded servers, keeping their data
         (`make stop`)
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["run"] and len(args) == 1:
        return cmd_run()
    if args[:1] == ["test"]:
        return cmd_test(args[1:])
    if args == ["stop"]:
        return cmd_stop()
    if args in (["-h"], ["--help"]):
        print(USAGE, end="")
        return 0
    print(USAGE, end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
