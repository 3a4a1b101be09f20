"""The process's writer of the engagement log: `append` (and `record`, `page_served`) only
add a row to an in-process buffer; a flush, FLUSH_SECONDS after the first row of a batch (at
once past FLUSH_AT rows), COPYs the batch into engagement_events in one round trip.

Best effort, as impressions (app.feed.impressions): nothing here fails or waits on a
request. The buffer is bounded (ENGAGEMENT_BUFFER_MAX rows): past it new rows are dropped
and counted (`feed_engagement_events_total{outcome="dropped_full"}`); a batch whose COPY
fails (PostgreSQL away, a statement error) is dropped and counted
(`outcome="dropped_failed"`); a process that stops flushes what it holds (`close`), one
that is killed loses at most FLUSH_SECONDS of events. Rows are stamped when appended.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
from prometheus_client import Counter
from sqlalchemy.ext.asyncio import AsyncEngine

from app.background_flush import BackgroundFlush
from app.engagement import partitions
from app.engagement.constants import FLUSH_AT, FLUSH_SECONDS, LABEL_MAX, REASON_MAX
from app.engagement.kinds import AUTHOR_LOOKUP, COLUMNS, TABLE, Event, Kind
from app.engagement.pg import driver

log = logging.getLogger("app.engagement.writer")

EVENTS = Counter(
    "feed_engagement_events_total",
    "Engagement log rows by outcome: written (COPYed), dropped_full (the buffer was full), "
    "dropped_failed (their batch's COPY failed)",
    ["outcome"],
)
_WRITTEN = EVENTS.labels("written")
_FULL = EVENTS.labels("dropped_full")
_FAILED = EVENTS.labels("dropped_failed")


def _label(value: str | None, limit: int) -> str | None:
    return None if value is None else value[:limit]


class EngagementLog(BackgroundFlush):
    """Buffer and batch writer of the engagement log (see the module doc)."""

    def __init__(self, engine: AsyncEngine, buffer_max: int) -> None:
        super().__init__("engagement")
        self.engine = engine
        self.buffer_max = buffer_max
        self._rows: list[Event] = []
        # This process's own counts (the metric is process-wide and cumulative; tests and
        # the benchmark read these).
        self.written = 0
        self.dropped_full = 0
        self.dropped_failed = 0

    @property
    def enabled(self) -> bool:
        return self.buffer_max > 0

    @property
    def pending(self) -> int:
        return len(self._rows)

    # -- appending (no I/O) --------------------------------------------------------------------

    def append(
        self,
        kind: Kind,
        viewer_id: int,
        post_id: int | None = None,
        author_id: int | None = None,
        *,
        session_id: str | None = None,
        position: int | None = None,
        reason: str | None = None,
        model_version: str | None = None,
        arm: str | None = None,
        at: datetime | None = None,
    ) -> bool:
        """One event; False when it was dropped (the log is off or its buffer full)."""
        event = Event(
            at or datetime.now(UTC),
            int(kind),
            viewer_id,
            post_id,
            author_id,
            _label(session_id, LABEL_MAX),
            position,
            _label(reason, REASON_MAX),
            _label(model_version, LABEL_MAX),
            _label(arm, LABEL_MAX),
        )
        return self._add([event]) == 1

    def record(
        self,
        kind: Kind,
        viewer_id: int,
        post_ids: Iterable[int],
        *,
        author_id: int | None = None,
        session_id: str | None = None,
        at: datetime | None = None,
    ) -> int:
        """One event of `kind` per post (a client's report: SEEN, CLICK, ...); the number
        kept. Without `author_id` the flush reads each post's author."""
        now = at or datetime.now(UTC)
        session = _label(session_id, LABEL_MAX)
        events = [Event(now, int(kind), viewer_id, p, author_id, session) for p in post_ids]
        return self._add(events)

    def page_served(
        self,
        viewer_id: int,
        posts: Sequence[tuple[int, int, int | None]],
        *,
        session_id: str | None,
        duplicates: int,
        cost_ms: float,
        position: int | None = None,
        model_version: str | None = None,
        arm: str | None = None,
        reasons: Sequence[str | None] | None = None,
        at: datetime | None = None,
    ) -> int:
        """A feed page: one IMPRESSION per post served ((post id, author id, position in
        its session or on the page)) and one PAGE row with the page's figures; the number
        kept. `model_version`, `arm` and the per-post `reasons` are the ranking's, when it
        names them."""
        now = at or datetime.now(UTC)
        session = _label(session_id, LABEL_MAX)
        version = _label(model_version, LABEL_MAX)
        arm = _label(arm, LABEL_MAX)
        impression = int(Kind.IMPRESSION)
        events = [
            Event(
                now,
                impression,
                viewer_id,
                post_id,
                author_id,
                session,
                at_position,
                _label(reasons[i], REASON_MAX) if reasons is not None else None,
                version,
                arm,
            )
            for i, (post_id, author_id, at_position) in enumerate(posts)
        ]
        page = Event(
            now,
            int(Kind.PAGE),
            viewer_id,
            session_id=session,
            position=position,
            model_version=version,
            arm=arm,
            shown=len(posts),
            duplicates=duplicates,
            empty=not posts,
            cost_ms=cost_ms,
        )
        events.append(page)
        return self._add(events)

    def _add(self, events: list[Event]) -> int:
        if not self.enabled or not events:
            return 0
        room = self.buffer_max - len(self._rows)
        if room < len(events):
            lost = len(events) - max(room, 0)
            self.dropped_full += lost
            _FULL.inc(lost)
            events = events[: max(room, 0)]
        self._rows.extend(events)
        if events:
            self._schedule(0.0 if len(self._rows) >= FLUSH_AT else FLUSH_SECONDS)
        return len(events)

    # -- writing -------------------------------------------------------------------------------

    async def flush(self) -> int:
        """COPY the buffered rows now; the rows written (0 when the batch was dropped)."""
        self._cancel_timer()
        batch, self._rows = self._rows, []
        if not batch:
            return 0
        try:
            async with driver(self.engine) as conn:
                batch = await _with_authors(conn, batch)
                try:
                    await _copy(conn, batch)
                except asyncpg.CheckViolationError:
                    # A day without its partition (the job did not run): make it, once.
                    await partitions.ensure(conn, {e.at.astimezone(UTC).date() for e in batch})
                    await _copy(conn, batch)
        except Exception:  # PostgreSQL away, a statement error: the batch is lost, counted
            self.dropped_failed += len(batch)
            _FAILED.inc(len(batch))
            log.warning("dropped %d engagement events: the COPY failed", len(batch), exc_info=True)
            return 0
        self.written += len(batch)
        _WRITTEN.inc(len(batch))
        return len(batch)

    def clear(self) -> None:
        """Drop what is buffered (tests: ids restart with every test's empty tables)."""
        self._cancel_timer()
        self._rows = []


async def _copy(conn: asyncpg.Connection[Any], batch: list[Event]) -> None:
    await conn.copy_records_to_table(TABLE, records=batch, columns=list(COLUMNS))


async def _with_authors(conn: asyncpg.Connection[Any], batch: list[Event]) -> list[Event]:
    """The batch with the authors its client-reported rows did not name, read in one query
    (a post gone meanwhile keeps a null author)."""
    wanted = {
        e.post_id
        for e in batch
        if e.author_id is None and e.post_id is not None and e.kind in AUTHOR_LOOKUP
    }
    if not wanted:
        return batch
    rows = await conn.fetch(
        "SELECT id, author_id FROM posts WHERE id = ANY($1::bigint[])", list(wanted)
    )
    authors = {row["id"]: row["author_id"] for row in rows}
    return [
        e._replace(author_id=authors.get(e.post_id))
        if e.author_id is None and e.post_id in authors
        else e
        for e in batch
    ]
