"""What the media cleanup job deletes (jobs.media), in bounded batches, each its own short
transaction:

- uploads never attached: a pending upload past its expiry (MEDIA_UPLOAD_TTL_SECONDS after
  createUpload) loses its staged object and becomes `expired`; rows of any state are deleted
  once the per-user budgets' 24 h are past too (an attached upload's staged key is deleted
  again then: a second PUT within its URL's life would have left one). Staged keys are
  random and never reused: their bytes go after the commit;
- media objects no live post uses, last attached MEDIA_UNREFERENCED_GRACE_SECONDS ago or
  more (the grace covers a createPost between writing an object and committing). The
  DELETE re-checks under the row lock an attach takes (`last_attached_at`), so an object
  attached meanwhile stays; its bytes are deleted before the commit, while the deleted rows
  are still locked: an attach of the same content waits for the commit, then finds no row
  and writes the bytes again (deleting after the commit could remove the bytes it just
  wrote). A crash in between leaves a row no live post uses, without its bytes: an attach
  rewrites missing bytes, the next pass deletes the row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.media.constants import BUDGET_WINDOW_SECONDS, CLEANUP_BATCH, CLEANUP_MAX_BATCHES
from app.media.store import ObjectStore

_EXPIRE_UPLOADS = text(
    """
    UPDATE uploads SET state = 'expired' WHERE id = ANY(ARRAY(
        SELECT id FROM uploads WHERE state = 'pending' AND expires_at < now()
        ORDER BY expires_at LIMIT :n FOR UPDATE SKIP LOCKED))
    RETURNING staging_key
    """
)
_DELETE_OLD_UPLOADS = text(
    """
    DELETE FROM uploads WHERE id = ANY(ARRAY(
        SELECT id FROM uploads
        WHERE created_at < now() - make_interval(secs => :window) AND state <> 'pending'
        ORDER BY created_at LIMIT :n FOR UPDATE SKIP LOCKED))
    RETURNING staging_key
    """
)
_UNUSED = """
    last_attached_at < now() - make_interval(secs => :grace)
    AND NOT EXISTS (SELECT 1 FROM post_media pm JOIN posts p ON p.id = pm.post_id
                    WHERE pm.media_key = media_objects.key AND p.deleted_at IS NULL)
"""
_DELETE_UNUSED_OBJECTS = text(
    f"""
    DELETE FROM media_objects WHERE key = ANY(ARRAY(
        SELECT key FROM media_objects WHERE {_UNUSED}
        ORDER BY last_attached_at LIMIT :n FOR UPDATE SKIP LOCKED))
      AND {_UNUSED}
    RETURNING key
    """
)


@dataclass(frozen=True, slots=True)
class Cleaned:
    uploads_expired: int
    uploads_deleted: int
    objects_deleted: int


async def _batches(
    engine: AsyncEngine,
    store: ObjectStore,
    statement: TextClause,
    params: Mapping[str, object],
    before_commit: bool = False,
) -> int:
    """Batches of `statement` (returning keys) until one is short; each batch's keys deleted
    from the store after its commit, or `before_commit`."""
    done = 0
    for _ in range(CLEANUP_MAX_BATCHES):
        async with engine.begin() as conn:
            keys = list((await conn.execute(statement, dict(params))).scalars())
            if before_commit:
                for key in keys:
                    await store.delete(key)
        if not before_commit:
            for key in keys:
                await store.delete(key)
        done += len(keys)
        if len(keys) < CLEANUP_BATCH:
            break
    return done


async def clean(engine: AsyncEngine, store: ObjectStore, grace_seconds: int) -> Cleaned:
    """One pass of the cleanup."""
    n = {"n": CLEANUP_BATCH}
    expired = await _batches(engine, store, _EXPIRE_UPLOADS, n)
    deleted = await _batches(
        engine, store, _DELETE_OLD_UPLOADS, {**n, "window": float(BUDGET_WINDOW_SECONDS)}
    )
    objects = await _batches(
        engine,
        store,
        _DELETE_UNUSED_OBJECTS,
        {**n, "grace": float(grace_seconds)},
        before_commit=True,
    )
    return Cleaned(expired, deleted, objects)
