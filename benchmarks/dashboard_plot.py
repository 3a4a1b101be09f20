"""The Grafana dashboard (ops/grafana/hybridfeed.json) drawn without Grafana: every panel's
PromQL queries, evaluated by a real Prometheus over a soak's /metrics, plotted in a PNG grid.

    python -m benchmarks.dashboard_plot [--soak-minutes 2] [--no-probe] [--out PNG]
    python -m benchmarks.dashboard_plot --url http://127.0.0.1:8000 --seconds 300 [--token T]

Without --url it runs `python -m benchmarks.soak --minutes N` (its own Redis, scratch database
and the processes `make run` starts, all on loopback) with PROMETHEUS_MULTIPROC_DIR set, so
the API's /metrics carries the workers' figures as under `make run`, and the synthetic probe
(`python -m app.probe --url <the soak's API>`, unless --no-probe) beside it, exporting
through the same directory as `make run` has it. A private Prometheus
(/usr/bin/prometheus, Debian's prometheus package: `make promtool` installs it) scrapes that
/metrics every --scrape seconds into a throwaway TSDB; at the end each panel's queries go
through Prometheus' query_range API exactly as the dashboard has them (`$__rate_interval`
filled in), so the picture shows what Grafana would, not a re-implementation of rate() and
histogram_quantile(). Stat panels show their last value in the dashboard's threshold colour.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil

from app.config import PROJECT_ROOT
from benchmarks.common import free_port

PROMETHEUS = "/usr/bin/prometheus"
DASHBOARD = PROJECT_ROOT / "ops" / "grafana" / "hybridfeed.json"
OUT = PROJECT_ROOT / "docs" / "screenshots" / "dashboard.png"
COLUMNS = 4
UNITS = {"s": "seconds", "ops": "per second", "reqps": "per second", "percentunit": "share",
         "short": ""}  # fmt: skip


# -- the system under the soak ----------------------------------------------------------------


def api_port_of(soak: subprocess.Popen[str], seconds: float = 180) -> int:
    """The port of the uvicorn the soak started (its child), once it is there."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if soak.poll() is not None:
            raise RuntimeError(f"the soak exited with {soak.returncode} before its API started")
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(soak.pid).children(recursive=True):
                argv = child.cmdline()
                if "uvicorn" in " ".join(argv) and "--port" in argv:
                    return int(argv[argv.index("--port") + 1])
        time.sleep(0.5)
    raise RuntimeError("the soak's API did not start")


@contextlib.contextmanager
def prometheus(target: str, token: str | None, scrape: float, workdir: Path) -> Iterator[str]:
    """A private Prometheus scraping `target` (host:port); yields its base URL."""
    if not os.access(PROMETHEUS, os.X_OK):
        sys.exit(f"{PROMETHEUS} is missing: `make promtool` installs Debian's prometheus package")
    job: dict[str, Any] = {"job_name": "hybridfeed", "static_configs": [{"targets": [target]}]}
    if token:
        job["authorization"] = {"credentials": token}
    config = {"global": {"scrape_interval": f"{scrape:g}s", "scrape_timeout": f"{scrape:g}s"},
              "scrape_configs": [job]}  # fmt: skip
    (workdir / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
    port = free_port()
    with (workdir / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/-/ready", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prometheus did not start: {workdir / 'prometheus.log'}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(15)


# -- the dashboard's queries ------------------------------------------------------------------


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """The dashboard's panels in reading order, each with the title of its row."""
    out, row = [], ""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            continue
        out.append({**panel, "row": row})
    return out


def promql(expr: str, rate_interval: str) -> str:
    return re.sub(r"\$__rate_interval|\$\{__rate_interval\}", rate_interval, expr)


def legend(fmt: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt) or "value"


def query_range(
    base: str, expr: str, start: float, end: float, step: float
) -> list[tuple[dict[str, str], list[float], list[float]]]:
    reply = httpx.get(
        f"{base}/api/v1/query_range",
        params={"query": expr, "start": start, "end": end, "step": step},
        timeout=30,
    ).json()
    if reply.get("status") != "success":
        raise RuntimeError(f"{expr}: {reply.get('error')}")
    series = []
    for result in reply["data"]["result"]:
        points = [(float(t), float(v)) for t, v in result["values"]]
        points = [(t - start, v) for t, v in points if math.isfinite(v)]
        if points:
            series.append((result["metric"], [t for t, _ in points], [v for _, v in points]))
    return series


# -- the picture ------------------------------------------------------------------------------


def threshold_colour(panel: dict[str, Any], value: float) -> str:
    steps = panel["fieldConfig"]["defaults"].get("thresholds", {}).get("steps", [])
    colour = "green"
    for step in steps:
        if step["value"] is None or value >= step["value"]:
            colour = step["color"]
    return {"green": "#2e7d32", "orange": "#ef6c00", "red": "#c62828"}.get(colour, colour)


def panel_unit(panel: dict[str, Any]) -> str:
    return str(panel["fieldConfig"]["defaults"].get("unit", ""))


def blank(ax: Any, text: str, colour: str, size: float, y: float = 0.5) -> None:
    """A text in the middle of an axis without ticks: a stat's value, or no data."""
    ax.text(0.5, y, text, ha="center", va="center", fontsize=size, color=colour,
            transform=ax.transAxes)  # fmt: skip
    ax.set_xticks([])
    ax.set_yticks([])


def plot_lines(ax: Any, unit: str, series: list[tuple[str, list[float], list[float]]]) -> None:
    scale = 100 if unit == "percentunit" else 1
    for name, ts, vs in series:
        ax.plot(ts, [v * scale for v in vs], linewidth=1.2, label=name)
    ax.grid(alpha=0.3)
    ax.set_ylabel("%" if unit == "percentunit" else UNITS.get(unit, unit), fontsize=8)
    ax.set_xlabel("soak time (s)", fontsize=7.5)
    ax.legend(fontsize=7, loc="upper left", ncol=2)


def draw(
    base: str, dashboard: dict[str, Any], start: float, end: float, out: Path, title: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = panels(dashboard)
    rows = math.ceil(len(shown) / COLUMNS)
    fig, axes = plt.subplots(rows, COLUMNS, figsize=(5.2 * COLUMNS, 2.9 * rows), squeeze=False)
    step = max(2.0, (end - start) / 240)
    for ax, panel in zip(axes.flat, shown, strict=False):
        ax.set_title(f"{panel['row']} · {panel['title']}", fontsize=9.5, loc="left")
        ax.tick_params(labelsize=7.5)
        series = [
            (legend(target.get("legendFormat", ""), labels), ts, vs)
            for target in panel["targets"]
            for labels, ts, vs in query_range(base, promql(target["expr"], "30s"), start, end, step)
        ]
        if not series:  # as Grafana says it: nothing exported or counted yet
            blank(ax, "no data", "#888", 11)
        elif panel["type"] == "stat":
            for n, (name, _, vs) in enumerate(series):
                value = f"{vs[-1]:.1f} s" if panel_unit(panel) == "s" else f"{vs[-1]:.0f}"
                colour = threshold_colour(panel, vs[-1])
                y = 0.5 + (len(series) / 2 - n - 0.5) * 0.22
                blank(ax, f"{name} {value}", colour, 17 if len(series) == 1 else 13, y)
        else:
            plot_lines(ax, panel_unit(panel), series)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    fig.suptitle(title, fontsize=13, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=72)
    print(f"dashboard: {out} ({len(shown)} panels)")


# -- the run ----------------------------------------------------------------------------------


def follow_soak(soak: subprocess.Popen[str], probe: subprocess.Popen[bytes] | None) -> None:
    """Echo the soak's report until its load has stopped ("totals:"), then stop the probe
    before the soak stops the service under it (its last round would fail for nothing)."""
    assert soak.stdout is not None
    for line in soak.stdout:
        if line.startswith("totals:") and probe is not None:
            probe.terminate()
            probe.wait(30)
        print(line, end="", flush=True)
    soak.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--soak-minutes", type=float, default=2.0)
    parser.add_argument("--url", help="scrape this running system instead of a soak")
    parser.add_argument("--seconds", type=float, default=300, help="with --url: how long")
    parser.add_argument("--token", default=os.environ.get("METRICS_TOKEN") or None)
    parser.add_argument("--scrape", type=float, default=2.0, help="scrape interval (s)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-probe", action="store_true", help="no app.probe beside the soak")
    args = parser.parse_args(argv)
    dashboard = json.loads(DASHBOARD.read_text())
    workdir = Path(tempfile.mkdtemp(prefix="dashboard_"))
    soak = probe = None
    try:
        if args.url:
            target = args.url.split("://", 1)[-1].rstrip("/")
            title = f"{args.url}, {args.seconds:g} s"
        else:
            multiproc = workdir / "multiproc"
            multiproc.mkdir()
            env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(multiproc)}
            soak = subprocess.Popen(
                [sys.executable, "-m", "benchmarks.soak", "--minutes", f"{args.soak_minutes:g}",
                 "--window", "20"],
                cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            target = f"127.0.0.1:{api_port_of(soak)}"
            if not args.no_probe:
                with (workdir / "probe.log").open("wb") as log:
                    probe = subprocess.Popen(
                        [sys.executable, "-m", "app.probe", "--url", f"http://{target}", "--interval", "5"],
                        cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                    )  # fmt: skip
            title = f"a {args.soak_minutes:g}-minute soak (python -m benchmarks.soak)"
        with prometheus(target, args.token, args.scrape, workdir) as base:
            start = time.time()
            if soak is not None:
                follow_soak(soak, probe)
            else:
                time.sleep(args.seconds)
            end = time.time()
            draw(
                base,
                dashboard,
                start,
                end,
                args.out,
                f"hybridfeed dashboard (ops/grafana/hybridfeed.json): its queries evaluated by "
                f"Prometheus over {title}",
            )
        return 0 if soak is None else (soak.returncode or 0)
    finally:
        for proc in (probe, soak):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(30)
        if probe is not None:
            rounds = [x for x in (workdir / "probe.log").read_text().splitlines() if " round " in x]
            print("probe (last rounds):", *rounds[-3:], sep="\n  ")
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
