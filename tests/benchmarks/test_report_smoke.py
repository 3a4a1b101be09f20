"""`python -m benchmarks.report --scale small` end to end, as the user runs it: generated
network, the real processes (API, relay, ARQ workers per lane) on a private redis-server and a
scratch database, every scenario. Asserts what was measured is correct (every post reached
every active follower exactly once, nothing leaked), not how fast it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from app.config import PROJECT_ROOT, Settings
from tests.conftest import BASE_DATABASE_URL


def _service_defaults() -> dict[str, str]:
    """The environment without the test session's shrunken settings (tests/conftest.py): the
    report measures the service as configured by default, plus its own per-strategy settings."""
    ours = {name.upper() for name in Settings.model_fields}
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ours and not k.startswith(("REALTIME_", "PROBE_"))
    }
    env["DATABASE_URL"] = BASE_DATABASE_URL
    return env


def test_small_scale_report_is_correct(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.report", "--scale", "small", "--out", str(tmp_path)],
        cwd=PROJECT_ROOT,
        env=_service_defaults(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = (done.stdout[-2000:] + done.stderr[-4000:]).replace("\r", "\n")
    assert done.returncode == 0, tail
    results = json.loads((tmp_path / "report-small.json").read_text())
    assert results["problems"] == []

    strategies = results["compare"]["strategies"]
    assert set(strategies) == {"push", "pull", "hybrid", "control"}
    for key, s in strategies.items():
        assert s["check_ok"], (key, s["problems"])
        assert s["posts"] == 42 and s["celebrity_posts"] == 2
    push, pull, hybrid = strategies["push"], strategies["pull"], strategies["hybrid"]
    # Push: the celebrity's posts are in every active follower's timeline, once each.
    assert push["entries_per_celebrity_post"] == push["celebrity_active_followers"]
    assert min(push["celebrity_active_followers"]) > 1000
    # Pull: no timeline write at all; followers found the posts on their feeds (over the API).
    assert pull["entries_per_ordinary_post"] == 0
    assert pull["entries_per_celebrity_post"] == [0, 0]
    assert pull["pulled_posts"] == 42 and pull["pulled_reads_checked"] > 0
    # Hybrid: the celebrity (2,000 followers, threshold 400) costs O(1) Redis writes.
    assert hybrid["entries_per_celebrity_post"] == [0, 0]
    assert hybrid["entries_per_ordinary_post"] == push["entries_per_ordinary_post"]
    assert results["compare"]["naive_reads"]["errors"] == 0
    for key, s in strategies.items():
        assert s["reads"]["errors"] == 0 and s["reads"]["reads"] > 0, key

    for key, b in results["burst"].items():
        assert b["check_ok"], (key, b["problems"])
        assert b["celebrity_posts"] == 4 and b["ordinary_posts"] > 0
    for key, sw in results["sweep"].items():
        assert sw["check_ok"], (key, sw["problems"])
    curves = results["curves"]
    assert curves["push"]["check_ok"] and curves["pull"]["check_ok"]
    assert [p["pulled"] for p in curves["pull"]["fanout"]] == [True] * 5
    assert not any(p["pulled"] for p in curves["push"]["fanout"])

    report = (tmp_path / "report-small.md").read_text()
    assert "every check passed" in report
    for png in ("small-strategies.png", "small-burst-lag.png", "small-curves.png"):
        assert (tmp_path / png).stat().st_size > 10_000
