"""The synthetic probe (issue 22), `python -m app.probe --once` as a separate process against
the real service: a uvicorn API (tests/servers.py), the outbox relay and both lanes' ARQ
workers, as `make run` starts them. The probe's metrics reach the API's /metrics through
PROMETHEUS_MULTIPROC_DIR, as under `make run`.

A healthy service gives a clean round; each fault the probe exists to catch is injected for
real, through a test-only switch the production profile refuses: a read path whose filter
lets everything through (FEED_FAULT_SKIP_FILTER) leaks, fan-out batches that fail every try
(JOB_FAULT_HOOK, jobs/faults.py) lose posts, and an inclusive keyset cursor
(FEED_FAULT_REPEAT_POST) repeats a post on the next page.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.config import PROJECT_ROOT
from app.fanout import lanes
from jobs import faults
from tests.helpers import sql
from tests.probe.probing import CANARIES, KINDS, figures, leaks, probe, service


async def test_a_healthy_service_gives_a_clean_round(write_path: None, metrics_dir: Path) -> None:
    async with service(metrics_dir) as api:
        code, [report] = await probe(api, metrics_dir, "--once")
        found = await figures(api)

    assert (code, report["result"], report["errors"]) == (0, "ok", []), report
    assert leaks(found) == dict.fromkeys(KINDS, 0.0)
    assert found["feed_probe_lost_posts_total"] == 0
    assert found["feed_probe_duplicates_total"] == 0
    assert found['feed_page_duplicates_total{mode="ranked"}'] == 0
    assert found['feed_page_duplicates_total{mode="chronological"}'] == 0
    assert found['feed_probe_rounds_total{result="ok"}'] == 1
    assert found['feed_probe_rounds_total{result="failed"}'] == 0
    # Two posts per edge, each seen by its follower; the round's end is stamped.
    assert found["feed_probe_post_visible_seconds_count"] == 2 * CANARIES
    assert found["feed_probe_last_round_timestamp_seconds"] > 0
    assert report["pages"] > 0


async def test_the_probe_catches_what_a_broken_filter_lets_through(
    write_path: None, metrics_dir: Path
) -> None:
    async with service(metrics_dir, FEED_FAULT_SKIP_FILTER="1") as api:
        code, [report] = await probe(api, metrics_dir, "--once")
        found = await figures(api)

    assert code == 1 and report["result"] == "failed", report
    # Deleted and PRIVATE posts stay in timelines (readers re-check every id): served at once.
    assert found['feed_probe_leaks_total{kind="deleted"}'] > 0, report
    assert found['feed_probe_leaks_total{kind="private"}'] > 0, report
    assert report["leaks"] == {kind: int(n) for kind, n in leaks(found).items()}
    assert found["feed_probe_lost_posts_total"] == 0
    assert found['feed_probe_rounds_total{result="failed"}'] == 1


async def test_the_probe_counts_posts_a_dropped_batch_lost(
    write_path: None, metrics_dir: Path, state: Any
) -> None:
    async with service(metrics_dir) as api:
        code, _ = await probe(api, metrics_dir, "--once")  # the canaries and their ring
        assert code == 0
        # A ring that has stood for an hour: no follow is recent enough for the read path to
        # pull the followee's posts itself, so only fan-out brings them.
        await sql("UPDATE follows SET created_at = created_at - interval '1 hour'")
        await sql(
            "UPDATE users SET fanout_mode_changed_at = fanout_mode_changed_at - interval '1 hour'"
        )
        await faults.fail_next(state.redis, lanes.FANOUT_BATCH, 10_000)
        try:
            code, [report] = await probe(api, metrics_dir, "--once", "--freshness", "2")
        finally:
            await state.redis.delete(faults.fail_key(lanes.FANOUT_BATCH))
        found = await figures(api)
        async with api.http() as http:
            served = [
                line
                for line in (await http.get("/metrics")).text.splitlines()
                if line.startswith(("feed_candidates_total", "feed_degraded_total"))
            ]

    assert code == 1 and report["result"] == "failed", (report, served)
    assert report["lost"] == 2 * CANARIES, (report, served)  # every post of the round
    assert found["feed_probe_lost_posts_total"] == 2 * CANARIES
    assert leaks(found) == dict.fromkeys(KINDS, 0.0)
    assert found['feed_probe_rounds_total{result="ok"}'] == 1  # the first run's


async def test_the_probe_catches_a_post_repeated_across_pages(
    write_path: None, metrics_dir: Path
) -> None:
    async with service(metrics_dir, FEED_FAULT_REPEAT_POST="1") as api:
        # Two rounds: the second's scrolls have the first's posts below their first pages.
        code, reports = await probe(api, metrics_dir, "--rounds", "2", "--interval", "0.1")
        found = await figures(api)

    assert code == 1, reports
    assert found["feed_probe_duplicates_total"] > 0, reports
    assert found["feed_probe_duplicates_total"] == sum(r["duplicates"] for r in reports)
    assert leaks(found) == dict.fromkeys(KINDS, 0.0)
    assert found["feed_probe_lost_posts_total"] == 0


@pytest.mark.parametrize("fault", ["FEED_FAULT_SKIP_FILTER", "FEED_FAULT_REPEAT_POST"])
def test_production_refuses_the_read_path_faults(fault: str) -> None:
    env = {**os.environ, "PROFILE": "production", "SECRET_KEY": "k" * 40, fault: "1"}
    check = [sys.executable, "-c", "from app.config import Settings; Settings()"]
    refused = subprocess.run(check, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert refused.returncode != 0
    assert f"{fault} is test-only: not with PROFILE=production" in refused.stderr


@pytest.mark.parametrize(
    ("env", "started"),
    [
        ({}, True),
        ({"PROBE_ENABLED": "0"}, False),
        ({"PROFILE": "production", "SECRET_KEY": "k" * 40}, False),
        ({"PROFILE": "production", "SECRET_KEY": "k" * 40, "PROBE_ENABLED": "1"}, True),
    ],
)
def test_make_run_starts_the_probe_unless_told_not_to(env: dict[str, str], started: bool) -> None:
    """`make run`'s process list (devtools.launcher) as each setting leaves it."""
    show = (
        "from devtools.launcher import PROCESSES as P; "
        "print(','.join(p.name for p in P if p.wanted is None or p.wanted()))"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PROBE_", "PROFILE"))}
    names = subprocess.run(
        [sys.executable, "-c", show],
        env={**base, **env},
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert ("probe" in names.split(",")) is started, names
    assert names.startswith("api,relay,worker,worker-big")
