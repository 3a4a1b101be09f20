"""The filter and hydration stage: which candidates the viewer may see now, read with
everything the page shows of them (one query: app.feed.rows), counted as filtered out.
Recommended candidates (a RANKED session's, `SessionRanking.recommended`) are judged by the
recommendation rule, the others by the home feed's; model scores never come into it."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import partial

from app.db.replica import REPLICA_STALE_ROWS, ReplicaRouter
from app.feed import rows as sql
from app.feed.rows import FeedRow, PageExtras, Reads
from app.observability.metrics import FEED_FILTERED


class PageFilter:
    """The authoritative filter over candidates; session pages' rows from a replica that
    keeps up (decision 0043), when one is given."""

    def __init__(self, reads: Reads, replica: ReplicaRouter | None = None) -> None:
        self.reads = reads
        # Session pages' bodies and authors from a replica that keeps up (decision 0043).
        self.replica = replica
        self.replica_reads = Reads(replica.engine) if replica is not None else None

    async def visible_rows(
        self,
        viewer_id: int,
        ids: Sequence[int],
        extras: PageExtras,
        newest: int | None = None,
        recommended: Collection[int] = (),
    ) -> dict[int, FeedRow]:
        """The visible rows among ids (the `newest` ones only, for id-ordered candidates);
        the `recommended` ones judged by the recommendation rule, the rest by the home
        feed's (app.feed.rows)."""
        visible = await sql.page_rows(self.reads, viewer_id, ids, extras, newest, recommended)
        if newest is not None and len(visible) == newest:
            # Cut by the limit: only candidates down to the oldest row returned were judged.
            oldest = min(visible)
            judged = sum(1 for i in ids if i >= oldest)
        else:
            judged = len(ids)
        FEED_FILTERED.inc(judged - len(visible))
        return visible

    async def session_rows(
        self,
        viewer_id: int,
        ids: Sequence[int],
        extras: PageExtras,
        recommended: Collection[int] = (),
    ) -> dict[int, FeedRow]:
        """`visible_rows` for a frozen session's positions. With a replica (decision 0043): the
        decision, counts and the viewer's like from the primary, the rest of each row from
        the replica while it keeps up; rows it has older than the primary's version (or not
        yet), and the viewer's own posts, from the primary."""
        replica, replica_reads = self.replica, self.replica_reads
        if replica is None or replica_reads is None:
            return await self.visible_rows(viewer_id, ids, extras, None, recommended)
        allowed = await sql.authorized(self.reads, viewer_id, ids, recommended)
        FEED_FILTERED.inc(len(ids) - len(allowed))
        if not allowed:
            return {}
        wanted = [p for p, a in allowed.items() if a.author_id != viewer_id]
        own = [p for p, a in allowed.items() if a.author_id == viewer_id]
        hydrated = await replica.read(
            "feed_session_page",
            partial(sql.hydrate, replica_reads, wanted),
            partial(sql.hydrate, self.reads, wanted),
        )
        behind = [p for p in wanted if p not in hydrated or hydrated[p][1] != allowed[p].version]
        stale = own + behind
        if stale:
            REPLICA_STALE_ROWS.inc(len(behind))
            hydrated.update(await sql.hydrate(self.reads, stale))
        return sql.assemble(allowed, hydrated, extras)
