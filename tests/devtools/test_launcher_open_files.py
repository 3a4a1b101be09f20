"""The open-file limit (decision 0092): the launcher raises it before its children start and
says why not further; an API process started without the launcher raises its own.

Each case runs in a subprocess started with a lowered limit (a process may always lower its
own), so the test process's limit is never touched.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Callable

import httpx

from app.api.transports.open_files import NR_OPEN, has_cap_sys_resource
from app.config import PROJECT_ROOT
from tests.helpers import eventually
from tests.servers import free_port

SOFT, HARD = 256, 4096


def lowered(soft: int = SOFT, hard: int = HARD) -> Callable[[], None]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return preexec


def limits_of(pid: int) -> tuple[int, int]:
    """(soft, hard) open files of a running process, from /proc."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no open-files line")


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        preexec_fn=lowered(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_launcher_raises_the_limit_and_says_why_not_further() -> None:
    done = run_python(
        "import resource\n"
        "from devtools.launcher import open_file_limit\n"
        "open_file_limit()\n"
        "print(*resource.getrlimit(resource.RLIMIT_NOFILE))\n"
    )
    soft, hard = map(int, done.stdout.split())
    nr_open = int(NR_OPEN.read_text())
    assert soft == hard, "the soft limit goes up to the hard one"
    logged = done.stderr
    assert "[launcher] open-file limit: soft 256 -> " in logged
    if has_cap_sys_resource():
        assert hard == nr_open, "with CAP_SYS_RESOURCE the hard limit goes to fs.nr_open"
        assert "not raised" not in logged
    else:
        assert hard == HARD, "without CAP_SYS_RESOURCE the hard limit stays"
        assert f"not raised to {nr_open:,}: raising the hard limit needs CAP_SYS_RESOURCE" in (
            logged
        )
        assert "LimitNOFILE=" in logged  # where to set it instead
    assert f"about {soft - 100:,} sockets per process" in logged


def test_without_a_known_ceiling_the_soft_limit_still_rises() -> None:
    """No fs.nr_open to read (not Linux, /proc hidden): the hard limit is the ceiling."""
    done = run_python(
        "from pathlib import Path\n"
        "from app.api.transports.open_files import raise_open_files\n"
        "got = raise_open_files(Path('/nonexistent/nr_open'))\n"
        "print(got.before[0], got.soft, got.hard, got.why_not)\n"
    )
    assert done.stdout.split() == [str(SOFT), str(HARD), str(HARD), "None"]


async def test_an_api_process_started_without_the_launcher_raises_its_own() -> None:
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "app.web:app", "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(  # noqa: ASYNC220 - returns at once
        argv,
        cwd=PROJECT_ROOT,
        env=dict(os.environ),
        preexec_fn=lowered(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=1.0) as http:

            async def healthy() -> bool:
                assert proc.poll() is None, "uvicorn exited"
                try:
                    return (await http.get("/healthz")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(healthy, 30.0, 0.05, "healthy")
        soft, hard = limits_of(proc.pid)
        assert soft == hard
        assert hard == (int(NR_OPEN.read_text()) if has_cap_sys_resource() else HARD)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    if not has_cap_sys_resource():  # said at WARNING, which --log-level warning shows
        assert b"open-file limit: soft 256 -> 4,096" in out
