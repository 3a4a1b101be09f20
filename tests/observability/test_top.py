"""`python -m app.top`, the terminal view: one frame (--once) of a real API server's /metrics
(lanes, pages/s from two scrapes, sockets, the probe's absence), behind METRICS_TOKEN; and
of a synthetic /metrics for what a test server does not export (the probe, per-lane
post-to-visible histograms)."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from app.config import PROJECT_ROOT
from tests.helpers import gql, sign_up
from tests.servers import ApiServer

TOKEN = "metrics-token-for-the-top-test-0123456789"


async def top(url: str, *args: str, token: str | None = TOKEN) -> tuple[int, str, str]:
    """Run `python -m app.top --once` to the end: (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "METRICS_TOKEN"}
    if token:
        env["METRICS_TOKEN"] = token
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.top", "--once", "--url", url, *args,
        cwd=PROJECT_ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture(scope="module")
async def api() -> AsyncIterator[ApiServer]:
    # Pages are read in a loop while top starts and scrapes twice: no read limit in the way.
    env = {"METRICS_TOKEN": TOKEN, "RATE_LIMIT_READS_PER_MINUTE": "100000"}
    async with ApiServer(env=env) as server:
        yield server


def line(output: str, start: str) -> str:
    found = [x for x in output.splitlines() if x.startswith(start)]
    assert found, f"no line starting {start!r} in:\n{output}"
    return found[0]


async def test_one_frame_of_a_real_server(api: ApiServer) -> None:
    async with api.http() as http:
        token = await sign_up(http, "alice")
        # Feed pages are read for as long as top runs, so its two scrapes see pages between them.
        running = asyncio.create_task(top(api.url, "--interval", "1.5"))
        while not running.done():
            (await gql(http, "Feed", {"first": 5, "mode": "RANKED"}, token=token)).ok()
            await asyncio.sleep(0.01)
        code, out, err = await running
    assert code == 0, err
    assert line(out, "hybridfeed top").startswith(f"hybridfeed top · {api.url} · ")
    assert "oldest job" in line(out, "Lanes")
    lanes = {x.split()[0]: x.split() for x in out.splitlines() if x.startswith(" " * 10)}
    assert {"default", "big"} <= set(lanes), out  # the API's live gauges, per lane
    assert lanes["default"][1:4] == ["0", "s", "0"], out  # nothing queued: no age, 0 jobs
    pages = float(re.search(r"^Feed\s+(\d+\.\d) pages/s", out, re.M).group(1))  # type: ignore[union-attr]
    assert pages > 0, out
    assert re.search(r"p99 first \d+(\.\d)? ms", line(out, "Feed")), out
    assert re.match(r"Live\s+0 sockets · \d+\.\d frames/s", line(out, "Live")), out
    assert line(out, "Outbox").endswith("oldest unpublished event 0 s")
    assert line(out, "Probe") == "Probe     no probe (feed_probe_* not exported: app.probe is off)"


async def test_without_the_metrics_token_top_says_why(api: ApiServer) -> None:
    code, out, err = await top(api.url, "--interval", "0.1", token=None)
    assert code == 2
    assert out == ""
    assert err.strip() == (
        f"app.top: {api.url}/metrics answered HTTP 401 (set METRICS_TOKEN or --token)"
    )
    code, _, err = await top("http://127.0.0.1:9", "--interval", "0.1")  # nobody listens
    assert code == 2
    assert "/metrics unreachable" in err


# -- a synthetic /metrics ---------------------------------------------------------------------

SCRAPE = """\
# TYPE feed_fanout_oldest_job_age_seconds gauge
feed_fanout_oldest_job_age_seconds{{lane="big"}} 42.5
feed_fanout_oldest_job_age_seconds{{lane="default"}} 0.25
# TYPE feed_fanout_queued_jobs gauge
feed_fanout_queued_jobs{{lane="big"}} 250
feed_fanout_queued_jobs{{lane="default"}} 1
# TYPE feed_post_visible_95_seconds histogram
feed_post_visible_95_seconds_bucket{{lane="default",le="0.1"}} 0
feed_post_visible_95_seconds_bucket{{lane="default",le="0.5"}} {n}
feed_post_visible_95_seconds_bucket{{lane="default",le="+Inf"}} {n}
feed_post_visible_95_seconds_count{{lane="default"}} {n}
feed_post_visible_95_seconds_sum{{lane="default"}} 1
# TYPE feed_probe_leaks_total counter
feed_probe_leaks_total{{kind="deleted"}} 1
feed_probe_leaks_total{{kind="blocked"}} 0
# TYPE feed_probe_lost_posts_total counter
feed_probe_lost_posts_total 2
# TYPE feed_probe_duplicates_total counter
feed_probe_duplicates_total 0
# TYPE feed_probe_rounds_total counter
feed_probe_rounds_total{{result="ok"}} 40
feed_probe_rounds_total{{result="failed"}} 3
# TYPE feed_probe_last_round_timestamp_seconds gauge
feed_probe_last_round_timestamp_seconds {last}
"""


@contextlib.contextmanager
def synthetic_metrics() -> Iterator[str]:
    """A /metrics whose histogram grows by 100 observations (0.1-0.5 s) per scrape and whose
    probe finished its last round 30 s before each scrape."""
    scrapes = {"n": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            scrapes["n"] += 1
            body = SCRAPE.format(n=100 * scrapes["n"], last=time.time() - 30).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_lanes_post_to_visible_and_the_probe_from_synthetic_series() -> None:
    with synthetic_metrics() as url:
        code, out, err = await top(url, "--interval", "0.1")
    assert code == 0, err
    lanes = {x.split()[0]: x for x in out.splitlines() if x.startswith(" " * 10)}
    # Big: 42.5 s old, 250 queued, no histogram. Default: 100 new observations in 0.1-0.5 s
    # between the scrapes: p99 = 0.1 + 0.4 * 0.99 = 496 ms.
    assert lanes["big"].split()[1:5] == ["42.5", "s", "250", "—"], out
    assert lanes["default"].split()[1:7] == ["250", "ms", "1", "—", "496", "ms"], out
    probe = line(out, "Probe")
    assert probe == "Probe     LEAKING · leaks 1 (deleted 1) · lost 2 · duplicates 0", out
    rounds = out.splitlines()[out.splitlines().index(probe) + 1]
    assert re.fullmatch(
        r" {10}rounds ok 40 failed 3 · last round 30\.\d s ago · post→visible p99 —", rounds
    ), rounds
    assert line(out, "Feed").startswith("Feed      — pages/s"), out
