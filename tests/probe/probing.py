"""The probe's tests' shared steps (tests/probe/test_probe.py, test_canaries.py): an API process
sharing its /metrics with the probe (`service`), one probe run to its end (`probe`), and the
probe's series as /metrics serves them (`figures`, `leaks`). Their fixtures (the relay and
workers `write_path`, `metrics_dir`) are in tests/probe/conftest.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from app.config import PROJECT_ROOT
from tests.helpers import metric_value
from tests.servers import ApiServer

PASSWORD = "probe-canary-test-password"
KINDS = ("deleted", "private", "blocked", "unfollowed")
CANARIES = 4  # each round: one change of each kind, two posts per edge of the ring
PROBE_SECONDS = 120.0


@asynccontextmanager
async def service(metrics_dir: Path, **env: str) -> AsyncIterator[ApiServer]:
    """An API process sharing its /metrics with the probe (multiprocess files)."""
    async with ApiServer(env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), **env}) as api:
        yield api


async def probe(api: ApiServer, metrics_dir: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    """Run the probe to its end: its exit code and its rounds (--json lines)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.probe", "--url", api.url, "--password", PASSWORD,
        "--canaries", str(CANARIES), "--json", *args,
        cwd=PROJECT_ROOT,
        env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), PROBE_SECONDS)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    rounds = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert rounds, f"the probe reported no round (exit {proc.returncode}):\n{err.decode()}"
    assert proc.returncode is not None
    return proc.returncode, rounds


async def figures(api: ApiServer) -> dict[str, float]:
    """The probe's series as the API's /metrics serves them (each must be exported)."""
    names = [f'feed_probe_leaks_total{{kind="{kind}"}}' for kind in KINDS] + [
        "feed_probe_lost_posts_total",
        "feed_probe_duplicates_total",
        'feed_probe_rounds_total{result="ok"}',
        'feed_probe_rounds_total{result="failed"}',
        "feed_probe_post_visible_seconds_count",
        "feed_probe_last_round_timestamp_seconds",
        # The service's own page figures over the probe's scrolls (decision 0023).
        'feed_page_duplicates_total{mode="ranked"}',
        'feed_page_duplicates_total{mode="chronological"}',
    ]
    async with api.http() as http:
        text = (await http.get("/metrics")).text
    return {name: metric_value(text, name) for name in names}


def leaks(found: dict[str, float]) -> dict[str, float]:
    """The leak counts by kind, out of `figures`."""
    return {kind: found[f'feed_probe_leaks_total{{kind="{kind}"}}'] for kind in KINDS}
