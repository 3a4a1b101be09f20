"""Per model version and experiment arm, from the log (`python -m app.ranking report`):
impressions; engagements per impression with its 95% Wilson interval; the duplicate rate
and the empty-page rate of the pages served; the p99 cost of a page.

Engagements per impression is a share of distinct (viewer, post) pairs served under the arm
that the viewer then liked, commented on or clicked (as source quality counts them,
app.engagement.features): a proportion, so the Wilson interval holds, and a repeated like
or a click on a post never served counts nothing. The duplicate rate is duplicates per
post shown and the empty-page rate empty pages per page, both from PAGE rows. Rows the
ranking did not label (no version, no arm) form their own group, shown as "-".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from app.engagement.kinds import ENGAGEMENTS, TABLE, Kind

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile

_PAIRS = f"""
WITH served AS (
    SELECT DISTINCT model_version, arm, viewer_id, post_id FROM {TABLE}
    WHERE kind = {int(Kind.IMPRESSION)} AND at >= $1 AND at < $2 AND post_id IS NOT NULL
), engaged AS (
    SELECT DISTINCT viewer_id, post_id FROM {TABLE}
    WHERE kind = ANY($3::smallint[]) AND at >= $1 AND at < $2 AND post_id IS NOT NULL
)
SELECT s.model_version, s.arm, count(*) AS pairs, count(e.post_id) AS engaged
FROM served s LEFT JOIN engaged e USING (viewer_id, post_id)
GROUP BY s.model_version, s.arm
"""
_IMPRESSIONS = f"""
SELECT model_version, arm, count(*) AS impressions FROM {TABLE}
WHERE kind = {int(Kind.IMPRESSION)} AND at >= $1 AND at < $2
GROUP BY model_version, arm
"""
_PAGES = f"""
SELECT model_version, arm, count(*) AS pages,
       coalesce(sum(shown), 0) AS shown, coalesce(sum(duplicates), 0) AS duplicates,
       count(*) FILTER (WHERE empty) AS empty,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY cost_ms) AS p99_ms
FROM {TABLE}
WHERE kind = {int(Kind.PAGE)} AND at >= $1 AND at < $2
GROUP BY model_version, arm
"""


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial share ((0, 0) without trials)."""
    if trials <= 0:
        return (0.0, 0.0)
    p = successes / trials
    denominator = 1 + z * z / trials
    center = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return (max(0.0, center - half), min(1.0, center + half))


@dataclass
class ArmFigures:
    model_version: str | None
    arm: str | None
    impressions: int = 0
    pairs: int = 0  # distinct (viewer, post) served
    engaged: int = 0  # of those, engaged with
    pages: int = 0
    shown: int = 0
    duplicates: int = 0
    empty_pages: int = 0
    p99_page_ms: float | None = None

    @property
    def engagement_rate(self) -> float:
        return self.engaged / self.pairs if self.pairs else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.engaged, self.pairs)

    @property
    def duplicate_rate(self) -> float:
        return self.duplicates / self.shown if self.shown else 0.0

    @property
    def empty_rate(self) -> float:
        return self.empty_pages / self.pages if self.pages else 0.0


async def report(
    conn: asyncpg.Connection[Any], since: datetime, until: datetime
) -> list[ArmFigures]:
    """Each (version, arm) seen in [since, until), sorted by version then arm."""
    arms: dict[tuple[str | None, str | None], ArmFigures] = {}

    def arm(row: asyncpg.Record) -> ArmFigures:
        key = (row["model_version"], row["arm"])
        return arms.setdefault(key, ArmFigures(*key))

    kinds = [int(k) for k in ENGAGEMENTS]
    async with conn.transaction(readonly=True, isolation="repeatable_read"):
        for row in await conn.fetch(_IMPRESSIONS, since, until):
            arm(row).impressions = row["impressions"]
        for row in await conn.fetch(_PAIRS, since, until, kinds):
            figures = arm(row)
            figures.pairs, figures.engaged = row["pairs"], row["engaged"]
        for row in await conn.fetch(_PAGES, since, until):
            figures = arm(row)
            figures.pages, figures.shown = row["pages"], row["shown"]
            figures.duplicates, figures.empty_pages = row["duplicates"], row["empty"]
            figures.p99_page_ms = row["p99_ms"]
    return sorted(arms.values(), key=lambda f: (f.model_version or "", f.arm or ""))


HEADER = (
    f"{'version':<16} {'arm':<12} {'impressions':>11} {'eng/imp':>8} {'95% interval':>17} "
    f"{'pages':>7} {'dup rate':>9} {'empty':>7} {'p99 ms':>8}"
)


def render(figures: list[ArmFigures], since: datetime, until: datetime) -> str:
    """The report as the command prints it."""
    lines = [
        f"engagement log {since.isoformat(timespec='seconds')} .. "
        f"{until.isoformat(timespec='seconds')}",
        HEADER,
    ]
    for f in figures:
        low, high = f.interval
        p99 = "-" if f.p99_page_ms is None else f"{f.p99_page_ms:.1f}"
        lines.append(
            f"{f.model_version or '-':<16} {f.arm or '-':<12} {f.impressions:>11} "
            f"{f.engagement_rate:>8.4f} {f'[{low:.4f}, {high:.4f}]':>17} {f.pages:>7} "
            f"{f.duplicate_rate:>9.4f} {f.empty_rate:>7.4f} {p99:>8}"
        )
    if not figures:
        lines.append("(no events in this period)")
    return "\n".join(lines)
