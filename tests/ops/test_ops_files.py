"""The files an operator loads (ops/): the Prometheus alert rules pass `promtool check rules`
and their unit tests (`promtool test rules`, synthetic series that make each alert fire and
stay quiet when healthy); the Grafana dashboard parses, and every PromQL expression in it and
in the rules is valid and names only metrics the service exports (found in app/ and jobs/).

promtool is Debian's `prometheus` package, installed by `make promtool` (which `make test`
runs first); these tests fail, naming that step, when it is missing.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import PROJECT_ROOT

PROMTOOL = "/usr/bin/promtool"
OPS = PROJECT_ROOT / "ops"
DASHBOARD = OPS / "grafana" / "hybridfeed.json"
RULES = OPS / "prometheus" / "alerts.yml"
RULES_TEST = OPS / "prometheus" / "alerts_test.yml"

METRIC_CLASSES = {"Counter", "Gauge", "Histogram", "Summary", "Info", "Enum"}
FAMILY_CLASSES = {"CounterMetricFamily", "GaugeMetricFamily", "HistogramMetricFamily"}
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
SUFFIXES = ("_bucket", "_count", "_sum", "_created")


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    if not os.access(PROMTOOL, os.X_OK):
        pytest.fail(
            f"{PROMTOOL} is missing: these tests need Debian's prometheus package. Install it "
            "with `make promtool` (apt-get install prometheus, as root)."
        )
    return subprocess.run(
        [PROMTOOL, *map(str, args)], capture_output=True, text=True, timeout=120, check=False
    )


# -- metric names -----------------------------------------------------------------------------


def exported_metrics() -> set[str]:
    """Metric names the code declares (prometheus_client metrics and the families that
    app.observability.exposition yields at scrape time), as they appear in /metrics."""
    names: set[str] = set()
    for folder in ("app", "jobs"):
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call) or not node.args:
                    continue
                func = node.func
                kind = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                first = node.args[0]
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                if kind in METRIC_CLASSES | FAMILY_CLASSES:
                    names.add(first.value)
                    if kind == "Counter" and not first.value.endswith("_total"):
                        names.add(first.value + "_total")
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers left once strings, label
    matchers, ranges, grouping clauses, functions and operators are taken out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', "", expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    found = re.findall(r"(?<![\w.$])([A-Za-z_:][A-Za-z0-9_:]*)\b(?!\s*\()", text)
    return {name for name in found if name.lower() not in PROMQL_WORDS}


def known(name: str, names: set[str]) -> bool:
    return name in names or any(
        name.endswith(suffix) and name.removesuffix(suffix) in names for suffix in SUFFIXES
    )


def dashboard_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, expr) of every query, rows' nested panels included."""
    out = []
    stack = list(dashboard["panels"])
    while stack:
        panel = stack.pop()
        stack.extend(panel.get("panels", []))
        out.extend((panel["title"], t["expr"]) for t in panel.get("targets", []) if "expr" in t)
    return out


def unknown_metrics(exprs: list[tuple[str, str]], names: set[str]) -> list[str]:
    problems = []
    for where, expr in exprs:
        selected = metric_names(expr)
        if not selected:
            problems.append(f"{where}: names no metric: {expr}")
        problems += [
            f"{where}: unknown metric {m}" for m in sorted(selected) if not known(m, names)
        ]
    return problems


def rule_exprs() -> list[tuple[str, str]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [(rule["alert"], rule["expr"]) for group in groups for rule in group["rules"]]


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


# -- the alert rules --------------------------------------------------------------------------


def test_the_alert_rules_pass_promtool_check() -> None:
    result = promtool("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_fires_on_its_synthetic_series_and_not_when_healthy() -> None:
    result = promtool("test", "rules", RULES_TEST)
    assert result.returncode == 0, result.stdout + result.stderr
    tested = set(re.findall(r"alertname: (\w+)", RULES_TEST.read_text()))
    assert tested == {name for name, _ in rule_exprs()}, "every alert has a test"
    for name, _ in rule_exprs():  # each fires somewhere: an exp_alerts list that is not empty
        assert re.search(
            rf"alertname: {name}\n\s+exp_alerts:\n\s+- exp_labels", RULES_TEST.read_text()
        ), name


def test_the_rule_tests_catch_a_rule_that_stopped_firing(tmp_path: Path) -> None:
    """The unit tests can fail: with the leak alert's threshold raised, promtool says so."""
    rules = RULES.read_text().replace(
        "increase(feed_probe_leaks_total[10m])) > 0", "increase(feed_probe_leaks_total[10m])) > 5"
    )
    assert rules != RULES.read_text()
    (tmp_path / "alerts.yml").write_text(rules)
    (tmp_path / "alerts_test.yml").write_text(RULES_TEST.read_text())
    result = promtool("test", "rules", tmp_path / "alerts_test.yml")
    assert result.returncode != 0
    assert "FeedProbeLeak" in result.stdout + result.stderr


def test_the_rules_name_only_exported_metrics() -> None:
    assert unknown_metrics(rule_exprs(), exported_metrics()) == []


# -- the dashboard ----------------------------------------------------------------------------


def test_the_dashboard_is_a_grafana_dashboard_on_a_prometheus_variable(dashboard) -> None:
    assert dashboard["schemaVersion"] >= 36
    assert dashboard["uid"] == "hybridfeed"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == [
        "Write path",
        "Read path",
        "Live updates",
        "Jobs",
        "Protection",
        "Synthetic probe",
    ]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["targets"], panel["title"]


def test_the_dashboard_names_only_exported_metrics(dashboard) -> None:
    exprs = dashboard_exprs(dashboard)
    assert unknown_metrics(exprs, exported_metrics()) == []
    shown = set().union(*(metric_names(e) for _, e in exprs))
    for wanted in (
        "feed_post_visible_95_seconds_bucket",
        "feed_fanout_oldest_job_age_seconds",
        "feed_page_duplicates_total",
        "feed_empty_pages_total",
        "feed_probe_leaks_total",
        "feed_probe_last_round_timestamp_seconds",
        "feed_request_seconds_bucket",
    ):
        assert wanted in shown, wanted


def test_a_panel_naming_an_unknown_metric_fails_the_check(dashboard) -> None:
    broken = copy.deepcopy(dashboard)
    broken["panels"][1]["targets"].append(
        {"refId": "Z", "expr": 'sum by (lane) (rate(feed_fanout_made_up_total{lane="big"}[5m]))'}
    )
    problems = unknown_metrics(dashboard_exprs(broken), exported_metrics())
    assert problems == [f"{broken['panels'][1]['title']}: unknown metric feed_fanout_made_up_total"]
    assert metric_names("time() - max(feed_probe_last_round_timestamp_seconds)") == {
        "feed_probe_last_round_timestamp_seconds"
    }
    assert metric_names(
        'histogram_quantile(0.99, sum by (le, lane) (rate(x_bucket{le="+Inf"}[$__rate_interval])))'
    ) == {"x_bucket"}


def test_every_dashboard_query_is_valid_promql(dashboard, tmp_path: Path) -> None:
    """promtool parses each query, as a recording rule (Grafana's $__ intervals filled in)."""
    rules = [
        {"record": f"dashboard:query_{n}", "expr": re.sub(r"\$__\w+", "5m", expr)}
        for n, (_, expr) in enumerate(dashboard_exprs(dashboard))
    ]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = promtool("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout
