"""Two-stage ranking of a session's window (decision 0078): stage 1, the hand-set formula
(app.ranking.scoring.formula_order), orders every candidate and cuts the best K; stage 2, the
served model (app.ranking.model), reorders those K by its score; the rest stay below in
stage-1 order. Then the rules (`arrange`): seen last, frequency, diversity.

Within one time budget: stage 2 starts only if stage 1 left time, and its answer is used only
if it came within the budget; past it, or when the model raises, the window keeps stage-1
order (`fallback` says why: the caller marks the page degraded and counts it). Stage 1 or the
rules past the budget raise RankingTimeout, as the formula alone always did.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from app.ranking.features import ViewerSignals, feature_matrix
from app.ranking.model import Scorer
from app.ranking.scoring import arrange, formula_order

log = logging.getLogger(__name__)


@dataclass
class Ranked:
    order: list[int]  # positions into the window's columns, as the session shows them
    fallback: str | None = None  # None, "budget" or "error": stage 2's answer was not used
    stage1: list[int] = field(default_factory=list)  # positions by the formula, best first
    stage2: dict[int, float] = field(default_factory=dict)  # position -> model score (top K)


def two_stage(
    post_ids: Sequence[int],
    author_ids: Sequence[int],
    likes: Sequence[int],
    comments: Sequence[int],
    affinity: Mapping[int, int],
    seen: AbstractSet[int],
    scorer: Scorer | None,
    signals: ViewerSignals,
    k: int,
    deadline: float,
    max_per_author: int = 0,
) -> Ranked:
    """The window's order (positions). `scorer` None: the formula alone ("formula-1")."""
    stage1 = formula_order(
        post_ids, author_ids, likes, comments, affinity, signals.now_ms, deadline
    )
    ranked = Ranked(stage1, stage1=stage1)
    if scorer is not None and stage1:
        ranked.order, ranked.stage2, ranked.fallback = _stage2(
            stage1, post_ids, author_ids, likes, comments, scorer, signals, k, deadline
        )
    ranked.order = arrange(ranked.order, post_ids, author_ids, seen, deadline, max_per_author)
    return ranked


def _stage2(
    stage1: list[int],
    post_ids: Sequence[int],
    author_ids: Sequence[int],
    likes: Sequence[int],
    comments: Sequence[int],
    scorer: Scorer,
    signals: ViewerSignals,
    k: int,
    deadline: float,
) -> tuple[list[int], dict[int, float], str | None]:
    if time.perf_counter() > deadline:
        return stage1, {}, "budget"
    top = stage1[:k]
    try:
        rows = feature_matrix(
            [post_ids[i] for i in top],
            [author_ids[i] for i in top],
            [likes[i] for i in top],
            [comments[i] for i in top],
            signals,
            scorer.features,
        )
        scores = list(scorer.score(rows))
        if len(scores) != len(top):
            raise ValueError(f"{len(scores)} scores for {len(top)} rows")
    except Exception:  # a served model must never fail a page: stage-1 order, counted
        log.exception("ranking model %s failed; stage-1 order", scorer.version)
        return stage1, {}, "error"
    if time.perf_counter() > deadline:
        return stage1, {}, "budget"
    # Best score first; ties keep stage-1 order (sorted is stable).
    by_model = sorted(range(len(top)), key=scores.__getitem__, reverse=True)
    # reverse=True on a stable sort keeps ties in their original order too.
    return [top[j] for j in by_model] + stage1[k:], dict(zip(top, scores, strict=True)), None
