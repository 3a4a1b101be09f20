"""Per-author fan-out mode with hysteresis: PULL at >= pull threshold, back to PUSH below
the (lower) push threshold, so an author hovering near one number does not flap."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import FANOUT_PULL, FANOUT_PUSH, User


@dataclass(frozen=True)
class ModeDecision:
    mode: int
    version: int
    follower_count: int
    # Set when this decision moved the author from PULL back to PUSH: the posts made since
    # `pull_since` live only in posts:{author} and must be pushed to followers now.
    pull_since: datetime | None = None


def next_mode(current: int, followers: int, settings: Settings) -> int:
    if current == FANOUT_PUSH and followers >= settings.fanout_pull_threshold:
        return FANOUT_PULL
    if current == FANOUT_PULL and followers < settings.fanout_push_threshold:
        return FANOUT_PUSH
    return current


async def resolve_mode(session: AsyncSession, author_id: int, settings: Settings) -> ModeDecision:
    """Read the author's mode under a row lock and switch it when a threshold was crossed."""
    row = (
        await session.execute(
            select(
                User.fanout_mode,
                User.fanout_mode_version,
                User.follower_count,
                User.fanout_mode_changed_at,
            )
            .where(User.id == author_id)
            .with_for_update()
        )
    ).one()
    mode = next_mode(row.fanout_mode, row.follower_count, settings)
    if mode == row.fanout_mode:
        return ModeDecision(mode, row.fanout_mode_version, row.follower_count)
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
    return ModeDecision(mode, row.fanout_mode_version + 1, row.follower_count, pull_since)
