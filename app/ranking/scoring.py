"""RANKED order: freshness decay x engagement x author affinity, then a diversity rule.

score = 0.5 ** (age_hours / HALF_LIFE_HOURS)
        * (1 + ENGAGEMENT_WEIGHT * ln(1 + likes + 2 * comments))
        * (1 + AFFINITY_WEIGHT * ln(1 + viewer's recent likes/comments on the author))
Diversity: no more than MAX_RUN consecutive posts by one author (greedy re-ordering).
Frequency (RANKING_MAX_PER_AUTHOR): an author's posts past that many in a session go below
the others' (feedback fatigue), each part diversified.
Seen last: posts the viewer already had impressions of (app.feed.impressions) come after
every unseen one, each group in the order above, so a refresh opens on what is new to them.
This is ranking version "formula-1", and stage 1 of the model versions (app.feed.rank):
`formula_order` scores, `arrange` applies the rules after stage 2's reordering.
Ranking never adds candidates: it only orders rows that already passed the filters.
If it overruns its time budget the caller falls back to freshness order (degraded).

Every RANKED first page ranks up to FEED_SESSION_SIZE (500) candidates, so `rank_columns`
works on parallel columns (as the filter query returns them): no object per candidate, the
sort runs on plain tuples, and the affinity factor is computed once per author.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from operator import and_, eq, itemgetter

from app.posts.ids import EPOCH_MS, SEQUENCE_BITS

HALF_LIFE_HOURS = 12.0
ENGAGEMENT_WEIGHT = 0.35
AFFINITY_WEIGHT = 0.5
MAX_RUN = 2


_POSITION = itemgetter(2)


class RankingTimeout(Exception):
    pass


def rank_columns(
    post_ids: Sequence[int],
    author_ids: Sequence[int],
    likes: Sequence[int],
    comments: Sequence[int],
    affinity: Mapping[int, int],
    now_ms: int,
    budget_seconds: float,
    seen: AbstractSet[int] = frozenset(),
    max_per_author: int = 0,
) -> list[int]:
    """Positions (into the columns) in ranked order; RankingTimeout past the budget.

    Ages come from the ids, which carry their creation millisecond; `seen` post ids go last.
    This is version "formula-1" whole: `formula_order` then `arrange`.
    """
    deadline = time.perf_counter() + budget_seconds
    order = formula_order(post_ids, author_ids, likes, comments, affinity, now_ms, deadline)
    return arrange(order, post_ids, author_ids, seen, deadline, max_per_author)


def formula_order(
    post_ids: Sequence[int],
    author_ids: Sequence[int],
    likes: Sequence[int],
    comments: Sequence[int],
    affinity: Mapping[int, int],
    now_ms: int,
    deadline: float,
) -> list[int]:
    """Stage 1: positions by the formula's score, best first (no rules applied yet);
    RankingTimeout past `deadline` (a perf_counter time)."""
    scores = formula_scores(post_ids, author_ids, likes, comments, affinity, now_ms)
    # (score, post id) descending; ids are unique, so the position never decides.
    keyed = sorted(zip(scores, post_ids, range(len(scores)), strict=True), reverse=True)
    if time.perf_counter() > deadline:
        raise RankingTimeout
    return list(map(_POSITION, keyed))


def formula_scores(
    post_ids: Sequence[int],
    author_ids: Sequence[int],
    likes: Sequence[int],
    comments: Sequence[int],
    affinity: Mapping[int, int],
    now_ms: int,
) -> list[float]:
    """The module docstring's score of each candidate."""
    log1p = math.log1p
    bonds = {a: 1 + AFFINITY_WEIGHT * log1p(affinity.get(a, 0)) for a in set(author_ids)}
    # Engagement takes few distinct values (most candidates have few likes): one log per
    # value, not per candidate. The same expressions as before, so the same floats.
    weights = [
        n_likes + 2 * n_comments for n_likes, n_comments in zip(likes, comments, strict=True)
    ]
    lifts = {w: 1 + ENGAGEMENT_WEIGHT * log1p(w) for w in set(weights)}
    # The module docstring's formula, one product per candidate (ages from the ids).
    since_epoch = now_ms - EPOCH_MS  # now_ms - created_ms(p), in integers, is this - (p >> bits)
    return [
        0.5 ** (max(0.0, (since_epoch - (p >> SEQUENCE_BITS)) / 3_600_000) / HALF_LIFE_HOURS)
        * lifts[w]
        * bonds[a]
        for p, a, w in zip(post_ids, author_ids, weights, strict=True)
    ]


def arrange(
    order: list[int],
    post_ids: Sequence[int],
    author_ids: Sequence[int],
    seen: AbstractSet[int],
    deadline: float,
    max_per_author: int = 0,
) -> list[int]:
    """The rules after the scores, on positions best first: seen last, then within the unseen
    and the seen each, the frequency rule (an author's posts past `max_per_author` go below
    the others; 0 = none) and the diversity rule. RankingTimeout past `deadline`."""
    if seen and not seen.isdisjoint(post_ids):
        groups: tuple[list[int], list[int]] = ([], [])  # unseen, seen
        for i in order:
            groups[post_ids[i] in seen].append(i)
        unseen, again = groups
        return _ruled(unseen, author_ids, deadline, max_per_author) + _ruled(
            again, author_ids, deadline, max_per_author
        )
    return _ruled(order, author_ids, deadline, max_per_author)


def _ruled(
    order: list[int], author_ids: Sequence[int], deadline: float, max_per_author: int
) -> list[int]:
    """The frequency rule, then the diversity rule within what it kept and what it moved."""
    if max_per_author <= 0 or len(order) <= max_per_author:
        return _diversified(order, author_ids, deadline)
    authors = list(map(author_ids.__getitem__, order))
    if max(Counter(authors).values()) <= max_per_author:  # in C: usually nobody is capped
        return _diversified(order, author_ids, deadline)
    counts: dict[int, int] = {}
    kept: list[int] = []
    moved: list[int] = []
    for i, a in zip(order, authors, strict=True):
        n = counts[a] = counts.get(a, 0) + 1
        (kept if n <= max_per_author else moved).append(i)
    return _diversified(kept, author_ids, deadline) + _diversified(moved, author_ids, deadline)


def _diversified(order: list[int], author_ids: Sequence[int], deadline: float) -> list[int]:
    """`order` (positions, best first) after the diversity rule."""
    picked = _diversify(list(map(author_ids.__getitem__, order)), deadline)
    if picked is None:
        return order
    return [order[i] for i in picked]


def _first_overrun(authors: Sequence[int]) -> int:
    """The first position that would make a run of MAX_RUN + 1 posts by one author (len()
    when none does), found in C: where MAX_RUN consecutive neighbour pairs are equal."""
    same = list(map(eq, authors, authors[1:]))  # same[i]: authors i and i + 1 are one
    for _ in range(MAX_RUN - 1):
        same = list(map(and_, same, same[1:]))
    try:
        return same.index(True) + MAX_RUN
    except ValueError:
        return len(authors)


def _diversify(authors: Sequence[int], deadline: float) -> list[int] | None:
    """The diversity rule on the authors of an ordered list: positions in the new order,
    None when that is the order as it is.

    Greedy: take the best remaining post that does not extend a run past MAX_RUN (the best
    one anyway when every remaining post is by the run's author). Up to the first position
    that would overrun, the greedy takes every post in turn: only the rest is walked (most
    of a heavy viewer's candidates come from many authors: often none of it). `pending`
    holds positions reversed, best last, so taking the best is a pop from the end.
    """
    start = _first_overrun(authors)
    if start >= len(authors):
        return None
    pending = list(range(len(authors) - 1, start - 1, -1))
    result = list(range(start))
    # The prefix ends with a run of exactly MAX_RUN (a longer one would overrun earlier).
    run_author, run_length = authors[start - 1], MAX_RUN
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
