"""The control plane's periodic pass (docs/decisions/0026-fanout-control-plane.md): decide
again the mode of the authors whose inputs changed lately, without a post to split, push a
switched-back author's pull-era posts, export the top authors' estimated costs and count the
time each lane spends over the freshness budget."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.models import User
from app.fanout import constants
from app.fanout.control import AuthorCost, authors_to_review, publish_costs
from app.fanout.lag import lane_lag_seconds
from app.fanout.lanes import Enqueue
from app.fanout.modes import MODE_NAMES, ModeDecision, resolve_mode
from app.fanout.split import Splitter
from app.observability.metrics import FANOUT_LANE_OVER_BUDGET
from app.redis_client import RedisRoles


@dataclass
class ModeReview:
    """One author's mode decided again (`review_mode`), and the pass over many (`review_pass`)."""

    sessions: async_sessionmaker[AsyncSession]
    settings: Settings
    roles: RedisRoles
    splitter: Splitter

    async def review_mode(
        self, author_id: int, enqueue: Enqueue
    ) -> tuple[bool, ModeDecision | None]:
        """The periodic pass (`review_pass`): decide the author's mode again without a post to
        split. A switch back to PUSH pushes the pull-era posts the way a split does
        (`Splitter.catch_up`, same job ids per mode version, so a retried pass repeats
        nothing); no post is being split, so none is left out. (switched, the decision;
        None: no such user any more)."""
        async with self.sessions.begin() as session:
            before = await session.scalar(
                select(User.fanout_mode_version).where(User.id == author_id).with_for_update()
            )
            if before is None:
                return False, None
            decision = await resolve_mode(session, author_id, self.settings, redis=self.roles)
        await self.splitter.catch_up(author_id, decision, enqueue, splitting=0)
        return decision.version != before, decision

    async def review_pass(self, enqueue: Enqueue, limit: int, interval_seconds: float) -> int:
        """One round of the control loop (jobs.tasks.review_fanout_modes, every
        `interval_seconds`): decide again the authors whose inputs changed lately, export the
        top ones' estimated costs, and count the time each lane spends over the freshness
        budget (a sample over it counts the whole interval). How many authors switched."""
        redis = self.roles.timelines
        switched = 0
        costs: list[tuple[int, ModeDecision]] = []
        for author_id in await authors_to_review(redis, limit):
            changed, decision = await self.review_mode(author_id, enqueue)
            switched += changed
            if decision is not None and decision.write_cost_seconds is not None:
                costs.append((author_id, decision))
        await self._publish_top_costs(costs, interval_seconds)
        budget = self.settings.fanout_freshness_budget_seconds
        for lane, (age, _waiting) in (await lane_lag_seconds(self.roles.queue)).items():
            if age > budget and interval_seconds > 0:
                FANOUT_LANE_OVER_BUDGET.labels(lane).inc(interval_seconds)
        return switched

    async def _publish_top_costs(
        self, costs: list[tuple[int, ModeDecision]], interval_seconds: float
    ) -> None:
        top = sorted(
            costs,
            key=lambda c: max(c[1].write_cost_seconds or 0.0, c[1].read_cost_seconds or 0.0),
            reverse=True,
        )[: self.settings.fanout_cost_top_authors]
        if not top:
            return
        async with self.sessions() as session:
            ids = [author_id for author_id, _ in top]
            rows = await session.execute(select(User.id, User.handle).where(User.id.in_(ids)))
            handles = {row.id: row.handle for row in rows}
        published = [
            AuthorCost(
                handles.get(author_id, str(author_id)),
                d.write_cost_seconds or 0.0,
                d.read_cost_seconds or 0.0,
                MODE_NAMES[d.mode],
            )
            for author_id, d in top
        ]
        # Kept a few rounds, so a scrape between two passes sees it; gone when passes stop.
        await publish_costs(
            self.roles.timelines,
            published,
            int(max(constants.COSTS_MIN_TTL_SECONDS, 3 * interval_seconds)),
        )
