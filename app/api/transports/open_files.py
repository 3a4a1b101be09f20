"""The process's open-file limit raised as far as the OS allows, and why not further.

Why: every websocket is a descriptor, so RLIMIT_NOFILE caps the sockets one API process can
hold (issue 38: 19,900 under a 20,000 limit). The soft limit may always go up to the hard
one; the hard one only with CAP_SYS_RESOURCE (root in the host's user namespace), up to the
kernel's `fs.nr_open`. The launcher raises it before starting its children (they inherit
it) and the served app raises it again at start-up, for deployments not started by the
launcher; both log what they got. A limit that stays low is said with its reason and where
to set it (docs/DEPLOYMENT.md, "Open files": systemd `LimitNOFILE=`, `--ulimit nofile=`).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

NR_OPEN = Path("/proc/sys/fs/nr_open")
CAP_SYS_RESOURCE = 24  # bit in /proc/self/status CapEff
SELF_STATUS = Path("/proc/self/status")
# Descriptors an API process uses besides its sockets (pools, pub/sub, logs, the listener).
RESERVED = 100


@dataclass(frozen=True, slots=True)
class OpenFiles:
    """What `raise_open_files` found and got."""

    before: tuple[int, int]  # (soft, hard) found
    soft: int
    hard: int
    ceiling: int  # the most the OS allows (fs.nr_open), or the hard limit where unknown
    why_not: str | None  # the hard limit stayed under the ceiling: why

    @property
    def sockets(self) -> int:
        """About as many sockets as one process can hold under the soft limit."""
        return max(0, self.soft - RESERVED)

    def describe(self) -> str:
        """One log line: what was found, what was got, and why not more."""
        soft0, hard0 = self.before
        line = f"open-file limit: soft {_n(soft0)} -> {_n(self.soft)}, hard {_n(hard0)}"
        line += f" -> {_n(self.hard)}" if self.hard != hard0 else " (kept)"
        line += f"; about {self.sockets:,} sockets per process"
        if self.why_not:
            line += f"; not raised to {_n(self.ceiling)}: {self.why_not}"
        return line


def _n(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else f"{value:,}"


def _ceiling(nr_open: Path, hard: int) -> int:
    """fs.nr_open on Linux (the most any process may get), else the hard limit."""
    try:
        return int(nr_open.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return hard


def has_cap_sys_resource(status: Path = SELF_STATUS) -> bool | None:
    """Whether this process holds CAP_SYS_RESOURCE (None: not Linux or unreadable)."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _why_not(error: OSError | ValueError, status: Path) -> str:
    if has_cap_sys_resource(status) is False:
        return (
            "raising the hard limit needs CAP_SYS_RESOURCE, which this process lacks "
            "(root inside a container or user namespace without it); set it where the "
            "process starts: systemd LimitNOFILE=, docker run --ulimit nofile=N:N, "
            "Kubernetes: the container runtime's default"
        )
    return f"setrlimit refused ({error}); set it where the process starts (LimitNOFILE=)"


def raise_open_files(nr_open: Path = NR_OPEN, status: Path = SELF_STATUS) -> OpenFiles:
    """Raise the hard limit to fs.nr_open where allowed, then the soft one to the hard one.
    Never fails: whatever cannot be raised stays, and `why_not` says why."""
    soft0, hard0 = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = _ceiling(nr_open, hard0)
    why_not: str | None = None
    hard = hard0
    if hard0 != resource.RLIM_INFINITY and hard0 < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, ceiling))
            hard = ceiling
        except (OSError, ValueError) as exc:
            why_not = _why_not(exc, status)
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError) as exc:  # e.g. macOS: an infinite hard limit, OPEN_MAX
            why_not = why_not or f"soft limit refused at {_n(hard)} ({exc})"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return OpenFiles((soft0, hard0), soft, hard, ceiling, why_not)
