"""One foreground command per README entry: `python -m devtools.launcher run|test [pytest args]`.

`make run` and `make test` call it. Why a Python launcher and not a Procfile tool: it has to
provision Postgres/Redis first (see devtools.provision), migrate and seed, and then own the
shutdown order: children get SIGTERM, then SIGKILL after a grace period, and only then do the
embedded servers that *this* launcher started go down. Servers it found already running are
left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from pydantic import ValidationError

from app.config import PROJECT_ROOT, asyncpg_url, get_settings
from devtools import provision


@dataclass
class ProcessSpec:
    """A supervised child. `{python}`, `{port}` and `{max_bytes}` in argv are filled in at
    start."""

    name: str
    argv: list[str]


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
            # frames can be written straight to the socket (app/api/raw_frames.py).
            "--ws-per-message-deflate",
            "false",
            # Websocket messages are bounded like HTTP bodies (MAX_REQUEST_BYTES): uvicorn
            # refuses a bigger one (1009) before buffering it; the app checks again.
            "--ws-max-size",
            "{max_bytes}",
            # A client that never reads must not hold the shutdown forever.
            "--timeout-graceful-shutdown",
            "5",
        ],
    ),
    ProcessSpec("relay", ["{python}", "-m", "jobs.relay"]),
    ProcessSpec("worker", ["{python}", "-m", "arq", "jobs.worker.WorkerSettings"]),
    ProcessSpec("worker-big", ["{python}", "-m", "arq", "jobs.worker.BigLaneWorkerSettings"]),
]

SEED_COMMAND = [sys.executable, "-m", "devtools.seed", "demo", "--if-empty"]

GRACE_SECONDS = 10.0
POLL_SECONDS = 0.2


def log(message: str) -> None:
    print(f"[launcher] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- test


def cmd_test(pytest_args: list[str]) -> int:
    """Run pytest against provisioned services; pytest's exit code is ours."""
    env = provision.ensure_services()
    os.environ.update(env)
    started = provision.started_services()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *pytest_args], cwd=PROJECT_ROOT)

    # Ctrl-C reaches pytest directly (same process group) and it prints its summary; we only
    # forward SIGTERM. A no-op handler, not SIG_IGN, so the child does not inherit "ignore".
    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGTERM:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    try:
        return proc.wait()
    finally:
        provision.stop_services(started)


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


def _database_has_users(database_url: str) -> bool:
    import asyncpg

    async def check() -> bool:
        conn = await asyncpg.connect(asyncpg_url(database_url))
        try:
            return bool(await conn.fetchval("SELECT EXISTS (SELECT 1 FROM users)"))
        finally:
            await conn.close()

    return asyncio.run(check())


def _seed_if_empty(database_url: str, env: dict[str, str]) -> None:
    if _database_has_users(database_url):
        return
    log("empty database: loading demo data")
    subprocess.run(SEED_COMMAND, cwd=PROJECT_ROOT, env=env, check=True)


def _start_children(env: dict[str, str], port: int) -> list[tuple[ProcessSpec, subprocess.Popen]]:
    children: list[tuple[ProcessSpec, subprocess.Popen]] = []
    preexec = _pdeathsig()
    for spec in PROCESSES:
        max_bytes = get_settings().max_request_bytes
        argv = [a.format(python=sys.executable, port=port, max_bytes=max_bytes) for a in spec.argv]
        # Own process group: the terminal's Ctrl-C reaches only us, so shutdown is ordered.
        proc = subprocess.Popen(
            argv,
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            process_group=0,
            preexec_fn=preexec,
        )
        log(f"started {spec.name} (pid {proc.pid}): {' '.join(argv)}")
        children.append((spec, proc))
    return children


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _stop_children(children: list[tuple[ProcessSpec, subprocess.Popen]], stop: _Stop) -> None:
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


def _supervise(env: dict[str, str], port: int, stop: _Stop) -> int:
    children = _start_children(env, port)
    base = f"http://127.0.0.1:{port}"
    lines = [
        f"  API        {base}",
        f"  GraphiQL   {base}/graphql",
        f"  Demo page  {base}/",
        f"  Postgres   {env['DATABASE_URL']}",
        f"  Redis      {env['REDIS_URL']}",
    ]
    print("\nhybridfeed is running:\n" + "\n".join(lines) + "\nCtrl-C stops everything.\n")
    sys.stdout.flush()

    code = 0
    while not stop.requested:
        dead = next(((s, p) for s, p in children if p.poll() is not None), None)
        if dead is not None:
            spec, proc = dead
            log(f"{spec.name} exited unexpectedly (code {proc.returncode}); stopping everything")
            code = 1
            break
        time.sleep(POLL_SECONDS)
    else:
        log("stopping")
    _stop_children(children, stop)
    return code


def cmd_run() -> int:
    """Provision, migrate, seed, then supervise PROCESSES until Ctrl-C/SIGTERM or a crash."""
    # Until supervision starts, SIGTERM behaves like Ctrl-C so the cleanup below still runs.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    stop = _Stop()
    try:
        port = get_settings().port  # PORT; bad settings fail here, before anything starts
        env = provision.ensure_services()
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
        _seed_if_empty(env["DATABASE_URL"], child_env)
        signal.signal(signal.SIGINT, stop.handler)
        signal.signal(signal.SIGTERM, stop.handler)
        return _supervise(child_env, port, stop)
    except KeyboardInterrupt:
        return 0
    except (provision.ProvisionError, subprocess.CalledProcessError, ValidationError) as exc:
        log(f"error: {exc}")
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a late Ctrl-C must not skip the cleanup
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stopped = provision.stop_services(provision.started_services())
        if stopped:
            log("stopped embedded " + ", ".join(stopped))


USAGE = """usage: python -m devtools.launcher run | test [pytest args...]

  run    provision PostgreSQL/Redis (embedded ones under .run/ unless DATABASE_URL/REDIS_URL
         are set), migrate, load the demo data into an empty database, then run the API on
         PORT (default 8000), the outbox relay and the ARQ workers until Ctrl-C (`make run`)
  test   provision the same way and run pytest with the given arguments (`make test`)
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["run"] and len(args) == 1:
        return cmd_run()
    if args[:1] == ["test"]:
        return cmd_test(args[1:])
    if args in (["-h"], ["--help"]):
        print(USAGE, end="")
        return 0
    print(USAGE, end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
