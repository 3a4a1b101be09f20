"""Features from the engagement log: each author's source quality, the share of their served
posts that the viewer then engaged with, smoothed towards the overall rate.

Computed by a periodic job (`compute_source_quality`, jobs.engagement, every
ENGAGEMENT_QUALITY_MINUTES) over the last ENGAGEMENT_QUALITY_WINDOW_DAYS: per author,
`impressions` is the distinct (viewer, post) pairs served (IMPRESSION rows) and
`engagements` those of the pairs the viewer then liked, commented on or clicked (ENGAGEMENTS;
a client-reported click on a post never served to that viewer counts for nothing, nor does
a second like of one post). With the window's overall rate `prior`,

    quality = (engagements + PRIOR_IMPRESSIONS * prior) / (impressions + PRIOR_IMPRESSIONS)

so a new author starts at the prior, not at 0 or 1. The ENGAGEMENT_QUALITY_MAX_AUTHORS
authors with the most impressions are kept in `author_quality` (row 0 holds the prior),
replaced whole in one transaction.

The read side is `SourceQuality`: an in-process map, reread every
ENGAGEMENT_QUALITY_REFRESH_SECONDS in the background; `of()` costs a dict lookup per author
and never waits on I/O (the ranking asks it for ~500 candidates' authors per first page).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.models import AUTHOR_QUALITY
from app.engagement.constants import DEFAULT_PRIOR_RATE, PRIOR_IMPRESSIONS
from app.engagement.kinds import ENGAGEMENTS, Kind
from app.engagement.pg import driver

log = logging.getLogger("app.engagement.features")

PRIOR_ROW = 0  # author_quality's row of the prior (no user has id 0)

# Per author: distinct served pairs, and those engaged with; $1/$2 the window, $3 the kinds.
_PER_AUTHOR = f"""
WITH served AS (
    SELECT DISTINCT viewer_id, post_id, author_id FROM engagement_events
    WHERE kind = {int(Kind.IMPRESSION)} AND at >= $1 AND at < $2
      AND post_id IS NOT NULL AND author_id IS NOT NULL
), engaged AS (
    SELECT DISTINCT viewer_id, post_id FROM engagement_events
    WHERE kind = ANY($3::smallint[]) AND at >= $1 AND at < $2 AND post_id IS NOT NULL
), per_author AS (
    SELECT s.author_id, count(*) AS impressions, count(e.post_id) AS engagements
    FROM served s LEFT JOIN engaged e USING (viewer_id, post_id)
    GROUP BY s.author_id
)
"""

_COMPUTE = (
    _PER_AUTHOR
    + """, prior AS (
    SELECT CASE WHEN coalesce(sum(impressions), 0) > 0
                THEN sum(engagements)::float8 / sum(impressions) ELSE $4 END AS rate,
           coalesce(sum(impressions), 0) AS impressions,
           coalesce(sum(engagements), 0) AS engagements
    FROM per_author
), kept AS (
    SELECT author_id, impressions, engagements FROM per_author
    ORDER BY impressions DESC, author_id LIMIT $5
)
INSERT INTO author_quality (author_id, impressions, engagements, quality, computed_at)
SELECT k.author_id, k.impressions, k.engagements,
       (k.engagements + $6 * p.rate) / (k.impressions + $6), $2
FROM kept k, prior p
UNION ALL
SELECT 0, least(p.impressions, 2147483647), least(p.engagements, 2147483647), p.rate, $2
FROM prior p
"""
)


@dataclass(frozen=True)
class QualityPass:
    """What one pass computed: authors kept and the prior (the window's overall rate)."""

    authors: int
    prior: float


def smoothed(engagements: int, impressions: int, prior: float) -> float:
    """The formula the job applies (for tests and for callers that count themselves)."""
    return (engagements + PRIOR_IMPRESSIONS * prior) / (impressions + PRIOR_IMPRESSIONS)


async def compute_source_quality(
    conn: asyncpg.Connection[Any], now: datetime, window_days: int, max_authors: int
) -> QualityPass:
    """Recompute author_quality from the log's last `window_days` before `now`."""
    since = now - timedelta(days=window_days)
    kinds = [int(k) for k in ENGAGEMENTS]
    async with conn.transaction():
        await conn.execute("DELETE FROM author_quality")
        await conn.execute(
            _COMPUTE, since, now, kinds, DEFAULT_PRIOR_RATE, max_authors, PRIOR_IMPRESSIONS
        )
        kept = await conn.fetchval("SELECT count(*) - 1 FROM author_quality")
        prior = await conn.fetchval(
            "SELECT quality FROM author_quality WHERE author_id = $1", PRIOR_ROW
        )
    return QualityPass(int(kept or 0), float(prior))


class SourceQuality:
    """Each author's source quality as this process last read it (see the module doc)."""

    def __init__(
        self,
        engine: AsyncEngine,
        refresh_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.refresh_seconds = refresh_seconds
        self._clock = clock
        self.prior = DEFAULT_PRIOR_RATE
        self._quality: dict[int, float] = {}
        self._read_at: float | None = None
        self._refreshing: asyncio.Task[None] | None = None

    def of(self, author_ids: Iterable[int]) -> dict[int, float]:
        """Each author's quality (the prior for one not computed); no I/O. A map older than
        ENGAGEMENT_QUALITY_REFRESH_SECONDS is reread in the background meanwhile."""
        self._maybe_refresh()
        quality, prior = self._quality, self.prior
        return {a: quality.get(a, prior) for a in author_ids}

    def quality(self, author_ids: Collection[int]) -> dict[int, float]:
        """`of`, as the ranking's source-quality feature asks (app.ranking.features)."""
        return self.of(author_ids)

    def get(self, author_id: int) -> float:
        """One author's quality (as `of`)."""
        self._maybe_refresh()
        return self._quality.get(author_id, self.prior)

    async def refresh(self) -> int:
        """Reread the table now; the authors read."""
        async with driver(self.engine) as conn:
            rows = await conn.fetch(f"SELECT author_id, quality FROM {AUTHOR_QUALITY.name}")
        quality = {row["author_id"]: row["quality"] for row in rows}
        prior = quality.pop(PRIOR_ROW, DEFAULT_PRIOR_RATE)
        self._quality, self.prior = quality, prior
        self._read_at = self._clock()
        return len(quality)

    def clear(self) -> None:
        """Forget the map (tests: ids restart with every test's empty tables)."""
        self._quality, self.prior, self._read_at = {}, DEFAULT_PRIOR_RATE, None

    def _maybe_refresh(self) -> None:
        stale = self._read_at is None or self._clock() - self._read_at >= self.refresh_seconds
        if not stale or (self._refreshing is not None and not self._refreshing.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # a script: it calls refresh() itself
        self._read_at = self._clock()  # one attempt per interval, whatever its outcome
        self._refreshing = loop.create_task(self._refresh_logged())

    async def _refresh_logged(self) -> None:
        try:
            await self.refresh()
        except Exception:  # keep the map it had: a ranking feature, never a failed page
            log.warning("source quality not reread", exc_info=True)
