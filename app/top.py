"""A terminal view of a running hybridfeed for those without Grafana: lanes and their lag,
post-to-visible p99, pages/s, sockets and the synthetic probe, read from /metrics only.

    python -m app.top [--url http://127.0.0.1:8000] [--interval 2] [--once] [--token T]

It scrapes /metrics every --interval seconds and redraws in place (ANSI home + clear, no
curses); rates and windowed p99s come from the difference between two scrapes, the way
Prometheus' rate() and histogram_quantile() would see them. --once scrapes twice, prints
one frame and exits (for scripts and tests). METRICS_TOKEN (or --token) is sent as
`Authorization: Bearer` when the server wants one (docs/API.md, "Production profile").
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families

CLEAR = "\x1b[H\x1b[2J"
Labels = tuple[tuple[str, str], ...]


class ScrapeFailed(Exception):
    """/metrics did not answer 200 (refused, down, wrong URL)."""


@dataclass(frozen=True)
class Scrape:
    """One /metrics answer: sample name -> {sorted labels -> value}, and when it was read."""

    at: float
    samples: dict[str, dict[Labels, float]]

    def values(self, name: str, **match: str) -> list[tuple[dict[str, str], float]]:
        return [
            (dict(labels), value)
            for labels, value in self.samples.get(name, {}).items()
            if all(dict(labels).get(k) == v for k, v in match.items())
        ]

    def total(self, name: str, **match: str) -> float | None:
        """Sum over every label set (None: not exported)."""
        found = self.values(name, **match)
        return sum(v for _, v in found) if found else None

    def by(self, name: str, label: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for labels, value in self.values(name):
            key = labels.get(label, "")
            out[key] = out.get(key, 0.0) + value
        return out

    def buckets(self, name: str, **match: str) -> list[tuple[float, float]]:
        """Cumulative [(le, count)] of a histogram, summed over the other labels."""
        sums: dict[float, float] = {}
        for labels, value in self.values(name + "_bucket", **match):
            le = float(labels["le"])
            sums[le] = sums.get(le, 0.0) + value
        return sorted(sums.items())


def parse(text: str, at: float) -> Scrape:
    samples: dict[str, dict[Labels, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return Scrape(at, samples)


def scrape(url: str, token: str | None, timeout: float = 5.0) -> Scrape:
    request = urllib.request.Request(url.rstrip("/") + "/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as exc:
        hint = " (set METRICS_TOKEN or --token)" if exc.code == 401 else ""
        raise ScrapeFailed(f"{url}/metrics answered HTTP {exc.code}{hint}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ScrapeFailed(f"{url}/metrics unreachable: {exc}") from exc
    return parse(text, time.time())


# -- figures ----------------------------------------------------------------------------------


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """histogram_quantile as Prometheus computes it: linear inside the bucket holding rank q;
    None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return lower  # the best a histogram can say
            if count == below:
                return le
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = le, count
    return lower


def windowed(
    before: Sequence[tuple[float, float]], now: Sequence[tuple[float, float]]
) -> Sequence[tuple[float, float]]:
    """Buckets observed between two scrapes; all of `now` when nothing new came (or after a
    restart), so a quiet system still shows its figure since start."""
    earlier = dict(before)
    delta = [(le, count - earlier.get(le, 0.0)) for le, count in now]
    if not delta or delta[-1][1] <= 0 or any(c < 0 for _, c in delta):
        return now
    return delta


def p99(before: Scrape, now: Scrape, name: str, **match: str) -> float | None:
    return quantile(0.99, windowed(before.buckets(name, **match), now.buckets(name, **match)))


def rate(before: Scrape, now: Scrape, name: str) -> float | None:
    a, b = before.total(name), now.total(name)
    if b is None:
        return None
    elapsed = now.at - before.at
    if a is None or elapsed <= 0 or b < a:
        return 0.0
    return (b - a) / elapsed


def seconds(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "—"
    if value == 0:
        return "0 s"
    if value < 0.01:
        return f"{value * 1000:.1f} ms"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.0f} min"


def count(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


# -- the frame --------------------------------------------------------------------------------


def frame(before: Scrape, now: Scrape, url: str) -> list[str]:
    """The screen as lines: what an operator looks at first, top to bottom."""
    stamp = datetime.fromtimestamp(now.at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"hybridfeed top · {url} · {stamp}", ""]
    lines += lane_lines(before, now)
    outbox = now.total("feed_outbox_oldest_unpublished_seconds")
    lines.append(f"{'Outbox':<9} oldest unpublished event {seconds(outbox)}")
    lines.append(feed_line(before, now))
    lines.append(live_line(before, now))
    retries = now.total("feed_job_retries_total")
    dead = now.total("feed_jobs_dead_lettered_total")
    lines.append(f"{'Jobs':<9} retries {count(retries)} · dead letters {count(dead)}")
    lines += probe_lines(before, now)
    return lines


def lane_lines(before: Scrape, now: Scrape) -> list[str]:
    ages = now.by("feed_fanout_oldest_job_age_seconds", "lane")
    queued = now.by("feed_fanout_queued_jobs", "lane")
    first_lanes = now.by("feed_post_first_visible_seconds_count", "lane")
    visible_lanes = now.by("feed_post_visible_95_seconds_count", "lane")
    lanes = sorted(set(ages) | set(queued) | set(first_lanes) | set(visible_lanes))
    header = (
        f"{'Lanes':<9} {'lane':<9} {'oldest job':>11} {'queued':>7} "
        f"{'→first p99':>11} {'→95% p99':>10}"
    )
    if not lanes:
        return [header, "  (no lane metrics exported)"]
    out = [header]
    for lane in lanes:
        first = p99(before, now, "feed_post_first_visible_seconds", lane=lane)
        visible = p99(before, now, "feed_post_visible_95_seconds", lane=lane)
        age = ages.get(lane)
        out.append(
            f"{'':<9} {lane:<9} {seconds(age):>11} {count(queued.get(lane)):>7} "
            f"{seconds(first):>11} {seconds(visible):>10}"
        )
    return out


def feed_line(before: Scrape, now: Scrape) -> str:
    pages = rate(before, now, "feed_request_seconds_count")
    page_p99 = {
        page: p99(before, now, "feed_request_seconds", page=page) for page in ("first", "next")
    }
    empty = now.total("feed_empty_pages_total")
    duplicates = now.total("feed_page_duplicates_total")
    per_second = "—" if pages is None else f"{pages:.1f}"
    return (
        f"{'Feed':<9} {per_second} pages/s · p99 first {seconds(page_p99['first'])}, "
        f"next {seconds(page_p99['next'])} · empty pages {count(empty)} · "
        f"duplicates {count(duplicates)}"
    )


def live_line(before: Scrape, now: Scrape) -> str:
    sockets = now.total("feed_realtime_subscribers")
    frames = rate(before, now, "feed_realtime_frames_delivered_total")
    deliver = p99(before, now, "feed_realtime_publish_to_deliver_seconds")
    per_second = "—" if frames is None else f"{frames:.1f}"
    return (
        f"{'Live':<9} {count(sockets)} sockets · {per_second} frames/s · "
        f"publish→deliver p99 {seconds(deliver)}"
    )


def probe_lines(before: Scrape, now: Scrape) -> list[str]:
    last = now.total("feed_probe_last_round_timestamp_seconds")
    leaks = now.by("feed_probe_leaks_total", "kind")
    if last is None and not leaks:
        return [f"{'Probe':<9} no probe (feed_probe_* not exported: app.probe is off)"]
    total_leaks = sum(leaks.values())
    lost = now.total("feed_probe_lost_posts_total")
    duplicates = now.total("feed_probe_duplicates_total")
    rounds = now.by("feed_probe_rounds_total", "result")
    age = None if not last else max(0.0, now.at - last)
    state = "LEAKING" if total_leaks else "ok"
    kinds = ", ".join(f"{k} {v:.0f}" for k, v in sorted(leaks.items()) if v)
    return [
        f"{'Probe':<9} {state} · leaks {total_leaks:.0f}{f' ({kinds})' if kinds else ''} · "
        f"lost {count(lost)} · duplicates {count(duplicates)}",
        f"{'':<9} rounds ok {count(rounds.get('ok'))} failed {count(rounds.get('failed'))} · "
        f"last round {seconds(age)} ago · post→visible p99 "
        f"{seconds(p99(before, now, 'feed_probe_post_visible_seconds'))}",
    ]


# -- the loop ---------------------------------------------------------------------------------


def run(url: str, token: str | None, interval: float, once: bool) -> int:
    before = scrape(url, token)
    while True:
        time.sleep(interval)
        now = scrape(url, token)
        lines = frame(before, now, url)
        if once:
            print("\n".join(lines))
            return 0
        sys.stdout.write(CLEAR + "\n".join([*lines, "", f"every {interval:g} s · Ctrl-C quits"]))
        sys.stdout.write("\n")
        sys.stdout.flush()
        before = now


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.top",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the API's base URL")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between scrapes")
    parser.add_argument("--once", action="store_true", help="print one frame and exit")
    parser.add_argument(
        "--token", default=os.environ.get("METRICS_TOKEN") or None, help="METRICS_TOKEN"
    )
    args = parser.parse_args(argv)
    try:
        return run(args.url.rstrip("/"), args.token, max(0.05, args.interval), args.once)
    except ScrapeFailed as exc:
        print(f"app.top: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
