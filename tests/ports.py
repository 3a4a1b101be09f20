"""Ports for the tests' own servers (uvicorn, Redis, Redis cluster nodes).

Below the kernel's ephemeral range (32768-60999 here), so no outgoing connection takes one
between its choice and the server's bind; each reserved by a lock file held for the test
process's life, so no other test process (an xdist worker, a second session) is handed it too,
as `bind(0)`'s released ports could be (once, in CI: a refused start-up's /healthz answered
by another test's server)."""

from __future__ import annotations

import fcntl
import random
import tempfile
from pathlib import Path
from typing import IO

from devtools.provision import _port_free

TEST_PORTS = range(20_000, 30_000)
_reserved: dict[int, IO[str]] = {}


def free_port(also: int | None = None) -> int:
    """A port of TEST_PORTS free now and reserved for this process; with `also`, port + also
    is free now too (a Redis cluster node's bus port, +10000)."""
    folder = Path(tempfile.gettempdir()) / "hf-test-ports"
    folder.mkdir(exist_ok=True)
    first = random.randrange(len(TEST_PORTS))
    for i in range(len(TEST_PORTS)):
        port = TEST_PORTS[(first + i) % len(TEST_PORTS)]
        if port in _reserved:
            continue
        lock = (folder / str(port)).open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            continue
        # Not in use by something that takes no lock (a server a crashed session left).
        if not _port_free(port) or (also is not None and not _port_free(port + also)):
            lock.close()
            continue
        _reserved[port] = lock
        return port
    raise RuntimeError(f"no free port in {TEST_PORTS}")
