"""Per-author fan-out mode. FANOUT_CONTROL=cost: decided by the control plane
(app.fanout.control: cost, freshness budget, hysteresis in cost terms, pins; the follower
thresholds when inputs are missing). FANOUT_CONTROL=threshold: PULL at >= the pull threshold,
back to PUSH below the (lower) push threshold, so an author hovering near one number does not
flap. Either way the switch happens under the author's row lock and bumps its mode version."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import FANOUT_PULL, FANOUT_PUSH, User
from app.fanout.control import (
    PINS,
    AuthorInputs,
    CostDecision,
    decide,
    gather_inputs,
    mark_for_review,
    note_catchup,
    threshold_mode,
)
from app.observability.metrics import FANOUT_DECISIONS, FANOUT_MODE_SWITCHES
from app.redis_client import RedisRoles

MODE_NAMES = {FANOUT_PUSH: "push", FANOUT_PULL: "pull"}


@dataclass(frozen=True)
class ModeDecision:
    mode: int
    version: int
    follower_count: int
    # Set when this decision moved the author from PULL back to PUSH: the posts made since
    # `pull_since` live only in posts:{author} and must be pushed to followers now.
    pull_since: datetime | None = None
    reason: str = "threshold"
    # The control plane's estimates (seconds of work per window); None without inputs.
    write_cost_seconds: float | None = None
    read_cost_seconds: float | None = None


async def _decide(
    session: AsyncSession, redis: RedisRoles | None, author_id: int, row: Any, settings: Settings
) -> CostDecision:
    if settings.fanout_control == "cost" and redis is not None:
        return decide(
            row.fanout_mode, await gather_inputs(session, redis, author_id, settings), settings
        )
    inputs = AuthorInputs(row.follower_count, None, None, None, None, row.fanout_pin)
    if row.fanout_pin in PINS:
        return decide(row.fanout_mode, inputs, settings)
    mode = threshold_mode(row.fanout_mode, row.follower_count, settings)
    return CostDecision(mode, "threshold", None, None, inputs)


async def resolve_mode(
    session: AsyncSession, author_id: int, settings: Settings, redis: RedisRoles | None = None
) -> ModeDecision:
    """Read the author's mode under a row lock and switch it when the decision says so.
    Without `redis` (no inputs to read) the thresholds decide, as FANOUT_CONTROL=threshold."""
    row = (
        await session.execute(
            select(
                User.fanout_mode,
                User.fanout_mode_version,
                User.follower_count,
                User.fanout_mode_changed_at,
                User.fanout_pin,
            )
            .where(User.id == author_id)
            .with_for_update()
        )
    ).one()
    decision = await _decide(session, redis, author_id, row, settings)
    FANOUT_DECISIONS.labels(decision.reason).inc()
    if decision.reason == "burst" and redis is not None:
        # Looked at again by the periodic pass until the burst is over.
        await mark_for_review(redis.timelines, author_id, int(datetime.now(UTC).timestamp() * 1000))
    mode = decision.mode
    costs = (decision.write_cost_seconds, decision.read_cost_seconds)
    if mode == row.fanout_mode:
        return ModeDecision(
            mode, row.fanout_mode_version, row.follower_count, None, decision.reason, *costs
        )
    FANOUT_MODE_SWITCHES.labels(MODE_NAMES[mode], decision.reason).inc()
    now = datetime.now(UTC)
    await session.execute(
        update(User)
        .where(User.id == author_id)
        .values(
            fanout_mode=mode,
            fanout_mode_version=row.fanout_mode_version + 1,
            fanout_mode_changed_at=now,
        )
    )
    pull_since = None
    if mode == FANOUT_PUSH:
        pull_since = row.fanout_mode_changed_at or datetime.fromtimestamp(0, UTC)
        if redis is not None:  # before the commit: a crash after it still finds the catch-up
            since_ms = int(pull_since.timestamp() * 1000)
            await note_catchup(redis.timelines, author_id, row.fanout_mode_version + 1, since_ms)
    return ModeDecision(
        mode, row.fanout_mode_version + 1, row.follower_count, pull_since, decision.reason, *costs
    )
