"""Outbox event names and the one way to record them (inside the caller's transaction)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import OutboxEvent

POST_CREATED = "PostCreated"
POST_EDITED = "PostEdited"
POST_DELETED = "PostDeleted"
POST_VISIBILITY_CHANGED = "PostVisibilityChanged"
# An operator restricted or unrestricted a post in regions (app.posts.restrictions).
POST_RESTRICTED = "PostRestricted"
FOLLOWED = "Followed"
UNFOLLOWED = "Unfollowed"
BLOCKED = "Blocked"


async def record(session: AsyncSession, event_type: str, payload: dict[str, Any]) -> None:
    """Add an event to the outbox in the current transaction; the relay publishes it later."""
    await session.execute(insert(OutboxEvent).values(event_type=event_type, payload=payload))
