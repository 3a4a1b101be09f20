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
from typing import NamedTuple, Protocol, TypeVar

HALF_LIFE_HOURS = 12.0
ENGAGEMENT_WEIGHT = 0.35
AFFINITY_WEIGHT = 0.5
MAX_RUN = 2


class Rankable(Protocol):
    """What ranking reads; the read path passes its filtered rows as they are."""

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


def rank(
    candidates: Sequence[R],
    affinity: Mapping[int, int],
    now_ms: int,
    budget_seconds: float,
) -> list[R]:
    """Ranked order; raises RankingTimeout past the budget (checked as it goes).

    Computes exactly `score()` (same operations in the same order, so the same floats), with
    the per-author affinity factor computed once per author: a first page ranks up to
    FEED_SESSION_SIZE (500) rows on every read.
    """
    deadline = time.perf_counter() + budget_seconds
    log1p = math.log1p
    bonds: dict[int, float] = {}
    keyed: list[tuple[float, int, R]] = []
    for c in candidates:
        bond = bonds.get(c.author_id)
        if bond is None:
            bond = bonds[c.author_id] = 1 + AFFINITY_WEIGHT * log1p(affinity.get(c.author_id, 0))
        age_hours = max(0.0, (now_ms - c.created_ms) / 3_600_000)
        freshness = 0.5 ** (age_hours / HALF_LIFE_HOURS)
        engagement = 1 + ENGAGEMENT_WEIGHT * log1p(c.likes + 2 * c.comments)
        keyed.append((freshness * engagement * bond, c.post_id, c))
    keyed.sort(key=lambda k: (k[0], k[1]), reverse=True)
    if time.perf_counter() > deadline:
        raise RankingTimeout
    return diversify([k[2] for k in keyed], deadline)


def diversify(ordered: Sequence[R], deadline: float = math.inf) -> list[R]:
    """Greedy: take the best remaining post that does not extend a run past MAX_RUN (the best
    one anyway when every remaining post is by the run's author).

    `pending` is kept reversed, best last, so taking the best is a pop from the end.
    """
    pending = list(reversed(ordered))
    result: list[R] = []
    run_author, run_length = None, 0
    while pending:
        if time.perf_counter() > deadline:
            raise RankingTimeout
        pick = len(pending) - 1
        if run_length >= MAX_RUN:
            for i in range(pick, -1, -1):
                if pending[i].author_id != run_author:
                    pick = i
                    break
        chosen = pending.pop(pick)
        result.append(chosen)
        if chosen.author_id == run_author:
            run_length += 1
        else:
            run_author, run_length = chosen.author_id, 1
    return result
