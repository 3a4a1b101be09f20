"""RANKED order: freshness decay x engagement x author affinity, then a diversity rule.

score = 0.5 ** (age_hours / HALF_LIFE_HOURS)
        * (1 + ENGAGEMENT_WEIGHT * ln(1 + likes + 2 * comments))
        * (1 + AFFINITY_WEIGHT * ln(1 + viewer's recent likes/comments on the author))
Diversity: no more than MAX_RUN consecutive posts by one author (greedy re-ordering).
Ranking never adds candidates: it only orders rows that already passed the filters.
If it overruns its time budget the caller falls back to freshness order (degraded).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HALF_LIFE_HOURS = 12.0
ENGAGEMENT_WEIGHT = 0.35
AFFINITY_WEIGHT = 0.5
MAX_RUN = 2


@dataclass(frozen=True)
class Candidate:
    post_id: int
    author_id: int
    created_ms: int
    likes: int
    comments: int


class RankingTimeout(Exception):
    pass


def score(c: Candidate, affinity: Mapping[int, int], now_ms: int) -> float:
    age_hours = max(0.0, (now_ms - c.created_ms) / 3_600_000)
    freshness = 0.5 ** (age_hours / HALF_LIFE_HOURS)
    engagement = 1 + ENGAGEMENT_WEIGHT * math.log1p(c.likes + 2 * c.comments)
    bond = 1 + AFFINITY_WEIGHT * math.log1p(affinity.get(c.author_id, 0))
    return freshness * engagement * bond


def freshness_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=lambda c: c.post_id, reverse=True)


def rank(
    candidates: Sequence[Candidate],
    affinity: Mapping[int, int],
    now_ms: int,
    budget_seconds: float,
) -> list[Candidate]:
    """Ranked order; raises RankingTimeout past the budget (checked as it goes)."""
    deadline = time.perf_counter() + budget_seconds
    scored = sorted(candidates, key=lambda c: (score(c, affinity, now_ms), c.post_id), reverse=True)
    if time.perf_counter() > deadline:
        raise RankingTimeout
    return diversify(scored, deadline)


def diversify(ordered: Sequence[Candidate], deadline: float = math.inf) -> list[Candidate]:
    """Greedy: take the best remaining post that does not extend a run past MAX_RUN."""
    pending = list(ordered)
    result: list[Candidate] = []
    while pending:
        if time.perf_counter() > deadline:
            raise RankingTimeout
        run_author = result[-1].author_id if len(result) >= MAX_RUN else None
        if run_author is not None and any(r.author_id != run_author for r in result[-MAX_RUN:]):
            run_author = None
        pick = 0
        if run_author is not None:
            pick = next((i for i, c in enumerate(pending) if c.author_id != run_author), 0)
        result.append(pending.pop(pick))
    return result
