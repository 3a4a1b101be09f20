"""Quiet logs by default (LOG_LEVEL, docs/decisions/0085): a process's routine lines are
counted, not printed, and summed up in one line per LOG_SUMMARY_SECONDS.

Why: under `make run` the synthetic probe's own requests, the health and metrics scrapes
and the ARQ workers' job lines for that traffic came to ~600 lines a minute while nobody
used the service, and buried the lines of a developer's own requests. Routine here means:

- an access line (`uvicorn.access`) of a request the probe made (its User-Agent starts with
  PROBE_USER_AGENT; app.api.endpoint.live_sockets marks the request) or of a GET of
  /healthz, /readyz or /metrics, answered below 500;
- uvicorn's `"WebSocket /graphql" [accepted]` and `connection open` lines of the probe's
  sockets;
- an ARQ worker's line for a job started or finished fine (`→`, `←`) and its health record.

Everything else prints as before: the developer's requests, every 5xx, refusals, failed and
retried jobs, warnings. `LOG_LEVEL=debug` prints every line (and the loggers' debug ones);
`warning` or `error` only problems (no summaries). LOG_LEVEL unset leaves the loggers at the
level their command line gave (uvicorn's `--log-level`, ARQ's `--verbose`), with summaries.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from app.config import Settings
from app.constants import PROBE_USER_AGENT

_PROBE_AGENT = PROBE_USER_AGENT.encode()
SCRAPE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# What each kind of routine line is called in a summary.
PROBE = "probe traffic"
SCRAPES = "health and metrics scrapes"
JOBS = "jobs done"
HEALTH = "worker health"
# ARQ's format strings of a job started, a job finished and a health record (arq.worker).
ARQ_JOB_STARTED = "%6.2fs → %s(%s)%s"
ARQ_JOB_DONE = "%6.2fs ← %s ● %s"
ARQ_HEALTH = "recording health: %s"
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

# Set in the task that serves one request or socket (each gets its own context copy).
_probe_request: ContextVar[bool] = ContextVar("probe_request", default=False)
_active = False  # summaries installed in this process: requests are then looked at


def note_request(scope: Mapping[str, Any]) -> None:
    """Mark the current request as the probe's when its User-Agent says so (only when
    this process summarises: otherwise nothing is looked at)."""
    if not _active:
        return
    for name, value in scope.get("headers", ()):
        if name == b"user-agent":
            if value.startswith(_PROBE_AGENT):
                _probe_request.set(True)
            return


def routine_access(record: logging.LogRecord) -> str | None:
    """uvicorn's access line: the probe's request or a scrape answered below 500."""
    args = record.args
    if record.levelno != logging.INFO or not isinstance(args, tuple) or len(args) != 5:
        return None
    path, status = str(args[2]).split("?", 1)[0], args[4]
    if not isinstance(status, int) or status >= 500:
        return None
    if _probe_request.get():
        return PROBE
    return SCRAPES if path in SCRAPE_PATHS and args[1] == "GET" else None


def routine_server(record: logging.LogRecord) -> str | None:
    """uvicorn's own lines (and its `websockets` protocol's, on the same logger): only the
    probe's sockets accepted and open are routine."""
    if record.levelno != logging.INFO or not _probe_request.get():
        return None
    message = str(record.msg)
    return PROBE if message == "connection open" or "[accepted]" in message else None


def routine_worker(record: logging.LogRecord) -> str | None:
    """ARQ's line of a job started or finished fine, and its health record."""
    if record.levelno != logging.INFO:
        return None
    if record.msg in (ARQ_JOB_STARTED, ARQ_JOB_DONE):
        return JOBS
    return HEALTH if record.msg == ARQ_HEALTH else None


class RoutineSummary(logging.Filter):
    """On a logger: routine records are counted instead of printed; the first one after
    `window_seconds` prints one summary line (to `summary`, another logger: a logger's own
    filters do not see it) with the counts since the last."""

    def __init__(
        self,
        kind: str,
        routine: Callable[[logging.LogRecord], str | None],
        summary: logging.Logger,
        window_seconds: float,
    ) -> None:
        super().__init__()
        self.kind, self.routine, self.summary = kind, routine, summary
        self.window_seconds = window_seconds
        self.counts: Counter[str] = Counter()
        self.since = time.monotonic()

    def filter(self, record: logging.LogRecord) -> bool:
        what = self.routine(record)
        if what is None:
            return True
        self.counts[what] += 1
        now = time.monotonic()
        if now - self.since >= self.window_seconds:
            counts, self.counts = self.counts, Counter()
            seconds, self.since = now - self.since, now
            self.summary.info(summary_line(self.kind, counts, seconds))
        return False


def summary_line(kind: str, counts: Counter[str], seconds: float) -> str:
    parts = ", ".join(f"{what} {n}" for what, n in counts.most_common())
    total = sum(counts.values())
    return (
        f"[quiet] {kind}: {total} routine lines in the last {seconds:.0f} s not shown"
        f" ({parts}); LOG_LEVEL=debug shows every line"
    )


def _configure(
    settings: Settings,
    loggers: Iterable[str],
    filters: Iterable[tuple[str, Callable[[logging.LogRecord], str | None]]],
    kind: str,
    summary: str,
) -> None:
    """LOG_LEVEL on `loggers` when it is set (unset, they keep the level the command line
    gave them: `uvicorn --log-level warning` stays so, and the compiled path's one-write
    responses with it, app.api.upstream.uvicorn.write_response); at `info`, set or not, the
    summaries on `filters`' loggers (a logger at `warning` never asks them)."""
    global _active
    level = settings.log_level
    if "log_level" in settings.model_fields_set:
        for name in loggers:
            logging.getLogger(name).setLevel(LEVELS[level])
    if level != "info":
        return
    for name, routine in filters:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RoutineSummary) for f in logger.filters):
            target = logging.getLogger(summary)
            window = settings.log_summary_seconds
            logger.addFilter(RoutineSummary(kind, routine, target, window))
    _active = True


def quiet_api(settings: Settings) -> None:
    """uvicorn's loggers in an API process (app.web's lifespan, the served app only)."""
    _configure(
        settings,
        ("uvicorn", "uvicorn.error", "uvicorn.access"),
        (("uvicorn.access", routine_access), ("uvicorn.error", routine_server)),
        "api",
        "uvicorn",  # not uvicorn.error: its own filter would count the summary
    )


def quiet_worker(settings: Settings, kind: str) -> None:
    """ARQ's loggers in a worker process (its on_startup); `kind` names it in summaries."""
    _configure(settings, ("arq",), (("arq.worker", routine_worker),), kind, "arq")
