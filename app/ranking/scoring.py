"""RANKED order: freshness decay x engagement x author affinity, then a diversity rule.

score = 0.5 ** (age_hours / HALF_LIFE_HOURS)
        * (1 + ENGAGEMENT_WEIGHT * ln(1 + likes + 2 * comments))
        * (1 + AFFINITY_WEIGHT * ln(1 + viewer's recent likes/comments on the author))
Diversity: no more than MAX_RUN consecutive posts by one author (greedy re-ordering).
Ranking never adds candidates: it only orders rows that already passed the filters.
If it overruns its time budget the caller falls back to freshness order (degraded).

Every RANKED first page ranks up to FEED_SESSION_SIZE (500) candidates, so the hot path,
`rank_columns`, works on parallel columns (as the filter query returns them): no object per
candidate, the sort runs on plain tuples, and the affinity factor is computed once per author.
It computes exactly `score()` (the same operations in the same order: the same floats).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol, TypeVar

from app.posts.ids import EPOCH_MS, SEQUENCE_BITS

HALF_LIFE_HOURS = 12.0
ENGAGEMENT_WEIGHT = 0.35
AFFINITY_WEIGHT = 0.5
MAX_RUN = 2


class Rankable(Protocol):
    """What ranking reads from a candidate."""

    @property
    def post_id(self) -> int: ...
    @property
    def author_id(self) -> int: ...
    @property
    def created_ms(self) -> int: ...
    @property
    def likes(self) -> int: ...
    @property
    def comments(self) -> int: ...


class Candidate(NamedTuple):
    post_id: int
    author_id: int
    created_ms: int
    likes: int
    comments: int


R = TypeVar("R", bound=Rankable)


class RankingTimeout(Exception):
    pass


def score(c: Rankable, affinity: Mapping[int, int], now_ms: int) -> float:
    age_hours = max(0.0, (now_ms - c.created_ms) / 3_600_000)
    freshness = 0.5 ** (age_hours / HALF_LIFE_HOURS)
    engagement = 1 + ENGAGEMENT_WEIGHT * math.log1p(c.likes + 2 * c.comments)
    bond = 1 + AFFINITY_WEIGHT * math.log1p(affinity.get(c.author_id, 0))
    return freshness * engagement * bond


def freshness_order(candidates: Sequence[R]) -> list[R]:
    return sorted(candidates, key=lambda c: c.post_id, reverse=True)


def rank_columns(
    post_ids: Sequence[int],
    author_ids: Sequence[int],
    likes: Sequence[int],
    comments: Sequence[int],
    affinity: Mapping[int, int],
    now_ms: int,
    budget_seconds: float,
    created_ms: Sequence[int] | None = None,
) -> list[int]:
    """Positions (into the columns) in ranked order; RankingTimeout past the budget.

    Without `created_ms`, ages come from the ids, which carry their creation millisecond.
    """
    deadline = time.perf_counter() + budget_seconds
    log1p = math.log1p
    if created_ms is None:
        created_ms = [(p >> SEQUENCE_BITS) + EPOCH_MS for p in post_ids]
    bonds = {a: 1 + AFFINITY_WEIGHT * log1p(affinity.get(a, 0)) for a in set(author_ids)}
    # score(), inlined operation for operation.
    scores = [
        (
            0.5 ** (max(0.0, (now_ms - ms) / 3_600_000) / HALF_LIFE_HOURS)
            * (1 + ENGAGEMENT_WEIGHT * log1p(n_likes + 2 * n_comments))
            * bonds[a]
        )
        for ms, a, n_likes, n_comments in zip(created_ms, author_ids, likes, comments, strict=True)
    ]
    # (score, post id) descending; ids are unique, so the position never decides.
    keyed = sorted(zip(scores, post_ids, range(len(scores)), strict=True), reverse=True)
    if time.perf_counter() > deadline:
        raise RankingTimeout
    order = [k[2] for k in keyed]
    picked = _diversify([author_ids[i] for i in order], deadline)
    return [order[i] for i in picked]


def rank(
    candidates: Sequence[R],
    affinity: Mapping[int, int],
    now_ms: int,
    budget_seconds: float,
) -> list[R]:
    """Ranked order of candidate objects; raises RankingTimeout past the budget."""
    positions = rank_columns(
        [c.post_id for c in candidates],
        [c.author_id for c in candidates],
        [c.likes for c in candidates],
        [c.comments for c in candidates],
        affinity,
        now_ms,
        budget_seconds,
        [c.created_ms for c in candidates],
    )
    return [candidates[i] for i in positions]


def diversify(ordered: Sequence[R], deadline: float = math.inf) -> list[R]:
    """Greedy: take the best remaining post that does not extend a run past MAX_RUN (the best
    one anyway when every remaining post is by the run's author)."""
    return [ordered[i] for i in _diversify([c.author_id for c in ordered], deadline)]


def _diversify(authors: Sequence[int], deadline: float) -> list[int]:
    """diversify() on the authors of an ordered list: positions in the diversified order.

    `pending` holds positions reversed, best last, so taking the best is a pop from the end.
    """
    pending = list(range(len(authors) - 1, -1, -1))
    result: list[int] = []
    run_author, run_length = -1, 0
    while pending:
        if time.perf_counter() > deadline:
            raise RankingTimeout
        pick = len(pending) - 1
        if run_length >= MAX_RUN:
            for i in range(pick, -1, -1):
                if authors[pending[i]] != run_author:
                    pick = i
                    break
        chosen = pending.pop(pick)
        result.append(chosen)
        if authors[chosen] == run_author:
            run_length += 1
        else:
            run_author, run_length = authors[chosen], 1
    return result
