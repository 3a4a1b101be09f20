"""The media cleanup (app.media.cleanup), an ARQ cron on the default lane's workers every
MEDIA_CLEANUP_MINUTES at :15 (0: by name only), once across workers, and by name (tests and
operators): uploads never attached and their staged bytes, objects no live post uses.
Not retried: the next pass does what one missed."""

from __future__ import annotations

from typing import Any

from app.media.cleanup import clean
from app.state import AppState

CLEANUP = "media_cleanup"


async def media_cleanup(ctx: dict[str, Any]) -> dict[str, int]:
    state: AppState = ctx["state"]
    done = await clean(
        state.engine, state.media_store, state.settings.media_unreferenced_grace_seconds
    )
    return {
        "uploads_expired": done.uploads_expired,
        "uploads_deleted": done.uploads_deleted,
        "objects_deleted": done.objects_deleted,
    }
