"""Housekeeping, an ARQ cron job (every PRUNE_EVERY_MINUTES, `jobs.constants`, on the
default lane's workers, once across workers): deletes what has outlived its use, in bounded
batches.

- createPost's and addComment's idempotency keys first used IDEMPOTENCY_KEY_TTL_SECONDS or
  more ago (docs/API.md, "Retries and idempotency"): a use past it takes the key over anyway
  (app.posts.service.key_expired), so deleting them changes no answer;
- post_widenings rows older than the widening window (an hour, decision 0067).

Each batch (PRUNE_BATCH rows, oldest first by an index on the time) is its own short transaction,
at most PRUNE_MAX_BATCHES per table and pass: a backlog is worked off over several passes and no
pass holds locks or a worker for long.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.posts.service import WIDENING_WINDOW
from jobs import constants


def _delete_batch(table: str, column: str) -> Any:
    # Oldest first through the time index; ctid: the rows just found, whatever their key.
    return text(
        f"DELETE FROM {table} WHERE ctid = ANY(ARRAY("  # (table and column: constants)
        f"SELECT ctid FROM {table} WHERE {column} < now() - make_interval(secs => :age) "
        f"ORDER BY {column} LIMIT :n))"
    )


_PRUNED = (
    ("idempotency_keys", "created_at", None),
    ("comment_idempotency_keys", "created_at", None),
    ("post_widenings", "widened_at", WIDENING_WINDOW.total_seconds()),
)


async def prune(engine: AsyncEngine, key_ttl_seconds: int) -> int:
    """One pass; how many rows it deleted."""
    deleted = 0
    for table, column, age in _PRUNED:
        statement = _delete_batch(table, column)
        params = {
            "age": float(age if age is not None else key_ttl_seconds),
            "n": constants.PRUNE_BATCH,
        }
        for _ in range(constants.PRUNE_MAX_BATCHES):
            async with engine.begin() as conn:
                n = (await conn.execute(statement, params)).rowcount
            deleted += n
            if n < constants.PRUNE_BATCH:
                break
    return deleted


async def prune_expired_keys(ctx: dict[str, Any]) -> int:
    """The cron's task (also enqueued by name: jobs.worker.PRUNE); rows deleted."""
    state = ctx["state"]
    return await prune(state.engine, state.settings.idempotency_key_ttl_seconds)
