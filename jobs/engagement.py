"""The engagement log's periodic jobs (app.engagement), on the default lane's workers, once
across workers, and by name (tests and operators pass the clock as an argument):

- `engagement_partitions` (hourly at :05): today's partition and AHEAD_DAYS more made, the
  ones past ENGAGEMENT_RETENTION_DAYS dropped (app.engagement.partitions);
- `engagement_features` (every ENGAGEMENT_QUALITY_MINUTES at :45): each author's source
  quality recomputed (app.engagement.features).

Neither is retried: the next run does what one missed (and a writer that finds no
partition for its batch makes it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.engagement import features, partitions
from app.engagement.pg import driver
from app.state import AppState

PARTITIONS = "engagement_partitions"
FEATURES = "engagement_features"


def _now(now: str | None) -> datetime:
    """The pass's clock: `now` (ISO, UTC unless it says) when given, else the wall clock."""
    if now is None:
        return datetime.now(UTC)
    when = datetime.fromisoformat(now)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


async def engagement_partitions(ctx: dict[str, Any], now: str | None = None) -> dict[str, Any]:
    state: AppState = ctx["state"]
    async with driver(state.engine) as conn:
        done = await partitions.maintain(
            conn, _now(now).date(), state.settings.engagement_retention_days
        )
    return {"created": done.created, "dropped": done.dropped}


async def engagement_features(ctx: dict[str, Any], now: str | None = None) -> dict[str, Any]:
    state: AppState = ctx["state"]
    settings = state.settings
    async with driver(state.engine) as conn:
        done = await features.compute_source_quality(
            conn,
            _now(now),
            settings.engagement_quality_window_days,
            settings.engagement_quality_max_authors,
        )
    return {"authors": done.authors, "prior": done.prior}
