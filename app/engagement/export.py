"""The log as Parquet, for offline training (`python -m app.ranking export`).

Streamed: a server-side cursor reads EXPORT_BATCH_ROWS rows at a time (in one read-only
transaction, a consistent snapshot), each batch written as a row group; memory holds one
batch, whatever the period (no ORDER BY: PostgreSQL would sort the whole period first).
Kinds are written by name (dictionary-encoded strings), times
as UTC microseconds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import pyarrow as pa
import pyarrow.parquet as pq

from app.engagement.constants import EXPORT_BATCH_ROWS
from app.engagement.kinds import COLUMNS, TABLE, kind_name

SCHEMA = pa.schema(
    [
        ("at", pa.timestamp("us", tz="UTC")),
        ("kind", pa.dictionary(pa.int8(), pa.string())),
        ("viewer_id", pa.int64()),
        ("post_id", pa.int64()),
        ("author_id", pa.int64()),
        ("session_id", pa.string()),
        ("position", pa.int32()),
        ("reason", pa.string()),
        ("model_version", pa.string()),
        ("arm", pa.string()),
        ("shown", pa.int32()),
        ("duplicates", pa.int32()),
        ("empty", pa.bool_()),
        ("cost_ms", pa.float32()),
    ]
)
assert tuple(SCHEMA.names) == COLUMNS  # one column order, the table's


@dataclass(frozen=True)
class Exported:
    rows: int
    batches: int


def _batch(rows: list[asyncpg.Record]) -> pa.RecordBatch:
    columns: list[Any] = [[row[i] for row in rows] for i in range(len(COLUMNS))]
    kinds = COLUMNS.index("kind")
    columns[kinds] = [kind_name(code) for code in columns[kinds]]
    arrays = [
        pa.array(values, type=field.type)
        if not pa.types.is_dictionary(field.type)
        else pa.array(values, type=pa.string()).dictionary_encode().cast(field.type)
        for values, field in zip(columns, SCHEMA, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


async def export(
    conn: asyncpg.Connection[Any],
    since: datetime,
    until: datetime,
    out: Path,
    batch_rows: int = EXPORT_BATCH_ROWS,
) -> Exported:
    """Write the rows of [since, until) to `out` (a Parquet file, replaced): day by day (the
    partitions' order), each day in the order written; no sort, so nothing waits on one."""
    query = f"SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE at >= $1 AND at < $2"
    rows_written = batches = 0
    with pq.ParquetWriter(out, SCHEMA, compression="zstd") as writer:
        async with conn.transaction(readonly=True, isolation="repeatable_read"):
            cursor = await conn.cursor(query, since, until)
            while True:
                rows = await cursor.fetch(batch_rows)
                if not rows:
                    break
                writer.write_batch(_batch(rows))
                rows_written += len(rows)
                batches += 1
    return Exported(rows_written, batches)
