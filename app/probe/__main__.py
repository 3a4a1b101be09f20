"""`python -m app.probe`: the synthetic probe (see app.probe). Runs rounds every
--interval seconds until SIGINT/SIGTERM; `--once` (or `--rounds N`) runs that many and exits 0
when every round was ok, 1 otherwise (for tests and cron)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
import time

from prometheus_client import start_http_server

from app.config import get_settings
from app.probe import metrics
from app.probe.client import Api, ProbeError
from app.probe.constants import HEARTBEAT_ROUNDS, READY_WAIT_SECONDS
from app.probe.ledger import Ledger
from app.probe.ring import Ring
from app.probe.round import Round, Tally
from app.probe.settings import canary_password, canary_prefix, get_probe_settings

log = logging.getLogger("app.probe")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    s = get_probe_settings()
    parser = argparse.ArgumentParser(
        prog="python -m app.probe",
        description="Synthetic probe: canary accounts that post, hide and read their feeds "
        "through the public API, counting leaks, lost posts and duplicates.",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the API's base URL")
    parser.add_argument("--password", default=None, help="canaries' password (PROBE_PASSWORD)")
    parser.add_argument(
        "--prefix",
        default=None,
        help="canary handle prefix (PROBE_HANDLE_PREFIX; default: the deployment's secret one)",
    )
    parser.add_argument(
        "--show-prefix",
        action="store_true",
        help="print the deployment's canary handle prefix (from SECRET_KEY) and exit",
    )
    parser.add_argument("--canaries", type=int, default=s.canaries, help="ring size (>= 3)")
    parser.add_argument("--interval", type=float, default=s.interval_seconds, help="seconds")
    parser.add_argument(
        "--freshness", type=float, default=s.freshness_seconds, help="lost-post budget, seconds"
    )
    parser.add_argument("--page-size", type=int, default=s.page_size, help="posts per page")
    parser.add_argument("--once", action="store_true", help="one round, then exit 0 (ok) or 1")
    parser.add_argument("--rounds", type=int, default=0, help="this many rounds, then exit")
    parser.add_argument(
        "--metrics-port", type=int, default=0, help="serve /metrics here (0: no server)"
    )
    parser.add_argument("--json", action="store_true", help="print each round as a JSON line")
    args = parser.parse_args(argv)
    if args.canaries < 3:
        parser.error("--canaries must be at least 3 (a block cuts follows both ways)")
    if args.once:
        args.rounds = 1
    args.password = args.password or canary_password(s)
    args.prefix = args.prefix or canary_prefix(s, lambda: get_settings().secret_key)
    return args


def record(tally: Tally) -> None:
    for kind, n in tally.leaks.items():
        metrics.LEAKS.labels(kind).inc(n)
    metrics.LOST.inc(tally.lost)
    metrics.DUPLICATES.inc(tally.duplicates)
    for seconds in tally.visible:
        metrics.POST_VISIBLE.observe(seconds)
    metrics.ROUNDS.labels("ok" if tally.ok else "failed").inc()
    metrics.LAST_ROUND.set(time.time())


async def wait_ready(api: Api, stop: asyncio.Event, within: float | None) -> bool:
    """Until /readyz answers 200 (False when `within` passed or a stop came first)."""
    started = time.monotonic()
    told = False
    while not stop.is_set():
        if await api.ready():
            return True
        waited = time.monotonic() - started
        if within is not None and waited > within:
            return False
        if not told and waited > 10:
            log.info("waiting for %s/readyz (the API and a worker of every lane)", api.url)
            told = True
        await _pause(stop, 0.5)
    return False


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), max(0.0, seconds))


async def run(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    api = Api(args.url)
    ring = Ring(api, args.prefix, args.canaries, args.password)
    ledger = Ledger()
    failed = 0
    try:
        if not await wait_ready(api, stop, READY_WAIT_SECONDS if args.rounds else None):
            if not stop.is_set():
                log.error(
                    "%s/readyz did not answer 200 within %.0f s", args.url, READY_WAIT_SECONDS
                )
            return 1 if args.rounds else 0
        number = 0
        while not stop.is_set() and (not args.rounds or number < args.rounds):
            started = time.monotonic()
            tally = await _one_round(api, ring, ledger, number, args, stop)
            if tally is None:  # stopped mid-round: not counted
                break
            record(tally)
            failed += not tally.ok
            _report(number, tally, time.monotonic() - started, args)
            number += 1
            if not args.rounds or number < args.rounds:
                await _pause(stop, started + args.interval - time.monotonic())
    finally:
        await ring.close()
        await api.close()
    return 1 if failed else 0


async def _one_round(
    api: Api, ring: Ring, ledger: Ledger, number: int, args: argparse.Namespace, stop: asyncio.Event
) -> Tally | None:
    """A round, or None when a stop came first (the round is cancelled: the next start
    repairs the ring)."""
    if not api.documents:
        try:
            await api.load_documents()
        except ProbeError as exc:
            return Tally(errors=[str(exc)])
    probe = Round(api, ring, ledger, number, args.freshness, args.page_size)
    task = asyncio.create_task(probe.run())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return None
    return task.result()


def _report(number: int, tally: Tally, seconds: float, args: argparse.Namespace) -> None:
    summary = {"round": number, "seconds": round(seconds, 2), **tally.summary()}
    if args.json:
        print(json.dumps(summary), flush=True)
    visible = sorted(tally.visible)
    p50 = f"{visible[len(visible) // 2]:.3f} s" if visible else "-"
    line = (
        f"round {number} {summary['result']} in {seconds:.1f} s: leaks {sum(tally.leaks.values())}"
        f", lost {tally.lost}, duplicates {tally.duplicates}, visible p50 {p50}"
        f", {tally.pages} pages"
    )
    if not tally.ok:
        log.warning("%s; %s", line, "; ".join(tally.errors) or dict(tally.leaks))
    elif args.rounds or number % HEARTBEAT_ROUNDS == 0:
        log.info(line)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.show_prefix:
        print(args.prefix)
        return 0
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
    if args.metrics_port:
        start_http_server(args.metrics_port, addr="127.0.0.1")
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
