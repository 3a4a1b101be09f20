"""Reading the engagement log back in tests: its rows, after the writer's flush."""

from __future__ import annotations

from typing import Any

from app.engagement.kinds import Kind
from tests.helpers import sql


async def logged(state: Any, kind: Kind | None = None) -> list[Any]:
    """Every row of the log (of `kind`), oldest first, once the buffer is flushed."""
    await state.engagement.flush()
    if kind is None:
        return await sql("SELECT * FROM engagement_events ORDER BY at, kind")
    return await sql(
        "SELECT * FROM engagement_events WHERE kind = $1 ORDER BY at, position", int(kind)
    )
