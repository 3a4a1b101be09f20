"""What the API process exposes, and to whom (decision 0065): the development profile's
surfaces (GraphiQL, introspection, an open /metrics, the demo page, detailed probes) stay
on loopback unless ALLOW_DEVELOPMENT_ON_NETWORK says otherwise, and the log says which
profile runs.

The bind address is uvicorn's (or gunicorn's) command line, which the server parsed before
it imported the app: `--host` / `UVICORN_HOST` (uvicorn's default 127.0.0.1), `--uds`,
`--fd`, gunicorn's `--bind` / `-b`. A process started some other way (an embedding program)
is not checked; its log still names the profile."""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket
from collections.abc import Mapping, Sequence

from app.config import Settings

log = logging.getLogger("app.exposure")

UVICORN_DEFAULT_HOST = "127.0.0.1"
LOCAL = "local"  # a unix socket: only this machine reaches it


def _options(argv: Sequence[str], *names: str) -> list[str]:
    """Every value given to one of `names` (`--x v`, `--x=v`, `-b v`)."""
    values: list[str] = []
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                values.append(argv[i + 1])
            elif name.startswith("--") and arg.startswith(name + "="):
                values.append(arg[len(name) + 1 :])
    return values


def _fd_host(fd: str) -> str:
    """The address an inherited listening socket is bound to (LOCAL for a unix socket)."""
    try:
        sock = socket.socket(fileno=int(fd))
    except (OSError, ValueError):
        return "unknown"
    try:
        if sock.family == socket.AF_UNIX:
            return LOCAL
        return str(sock.getsockname()[0])
    except OSError:
        return "unknown"
    finally:
        sock.detach()  # the server's socket: not ours to close


def bind_hosts(argv: Sequence[str], environ: Mapping[str, str]) -> list[str] | None:
    """The addresses the serving process listens on, from its command line; None when it is
    not started by uvicorn's or gunicorn's command line."""
    program = " ".join(argv[:1]).lower()
    if "gunicorn" in program:
        binds = _options(argv, "--bind", "-b") or ["127.0.0.1:8000"]
        hosts = []
        for bind in binds:
            if bind.startswith(("unix:", "fd://")):
                hosts.append(LOCAL if bind.startswith("unix:") else _fd_host(bind[5:]))
            else:
                host = bind.rsplit(":", 1)[0] if ":" in bind.lstrip("[") else bind
                hosts.append(host.strip("[]") or "0.0.0.0")
        return hosts
    if "uvicorn" not in program:
        return None
    if _options(argv, "--uds") or environ.get("UVICORN_UDS"):
        return [LOCAL]
    fds = _options(argv, "--fd") or ([environ["UVICORN_FD"]] if environ.get("UVICORN_FD") else [])
    if fds:
        return [_fd_host(fd) for fd in fds]
    hosts = _options(argv, "--host")
    return hosts[-1:] or [environ.get("UVICORN_HOST") or UVICORN_DEFAULT_HOST]


def is_loopback(host: str) -> bool:
    if host == LOCAL or host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a name (or an unknown address): it may resolve to anything


def check_start(settings: Settings, hosts: list[str] | None) -> None:
    """Refuse a development profile on a non-loopback address unless it is asked for; log
    which profile runs, loudly (WARNING: shown at any log level)."""
    exposed = [h for h in hosts or [] if not is_loopback(h)]
    if settings.profile == "production":
        log.warning(
            "PROFILE=production: GraphiQL, introspection, the demo page and detailed probes "
            "are off; /metrics %s",
            "wants METRICS_TOKEN" if settings.metrics_token else "is off (no METRICS_TOKEN)",
        )
        return
    if exposed and not settings.allow_development_on_network:
        raise RuntimeError(
            f"PROFILE=development (the default) refuses to listen on {', '.join(exposed)}: it "
            "serves GraphiQL, introspection, an open /metrics, the demo page and detailed "
            "health checks to whoever reaches it. Set PROFILE=production for a deployment, "
            "bind to 127.0.0.1, or set ALLOW_DEVELOPMENT_ON_NETWORK=1 if exposing a "
            "development server is what you want (docs/SECURITY.md, decision 0065)"
        )
    where = ", ".join(hosts) if hosts else "an address this process cannot tell"
    log.warning(
        "PROFILE=development on %s: GraphiQL, introspection, /metrics%s, the demo page and "
        "detailed health checks are open%s. Not for a deployment: set PROFILE=production.",
        where,
        "" if not settings.metrics_token else " (with METRICS_TOKEN)",
        " TO THE NETWORK (ALLOW_DEVELOPMENT_ON_NETWORK)" if exposed else "",
    )


def may_see_details(settings: Settings, authorization: str | None) -> bool:
    """Whether /healthz and /readyz may name what is down and why to this caller: always in
    development; in production only to the bearer of METRICS_TOKEN (anonymous callers get
    the status alone: which dependency failed and how is a map for an attacker)."""
    if settings.profile != "production":
        return True
    token = settings.metrics_token
    if not token:
        return False
    return hmac.compare_digest((authorization or "").encode(), f"Bearer {token}".encode())
