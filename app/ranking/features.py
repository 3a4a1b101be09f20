"""Stage-2 features: one row per candidate, computed in columns from what the read path already
holds (the filter's ranking columns, the viewer's context, impressions) - no I/O here.

Columns, in FEATURES order (a model's manifest names the ones it was trained on, in its order):
- age_hours: hours since the post was made (from its id);
- likes, comments: the post's counts;
- affinity: the viewer's recent likes + comments on the author (ViewerContext.affinity);
- source_quality: the author's engagement rate (SourceQuality; a prior until the engagement
  log provides it);
- fewer: the viewer's "show fewer like this" on the author (NegativeFeedback; 0 until the
  feedback part provides it);
- recommended: 1 when the post came from the recommendation source, 0 when followed/own;
- seen: 1 when the viewer already had an impression of it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from app.posts.ids import EPOCH_MS, SEQUENCE_BITS

FEATURES: tuple[str, ...] = (
    "age_hours",
    "likes",
    "comments",
    "affinity",
    "source_quality",
    "fewer",
    "recommended",
    "seen",
)
# An author's engagement rate before the log has measured it: likes + comments per
# impression across the bulk network's authors (the training script's synthetic mean).
QUALITY_PRIOR = 0.05


class SourceQuality(Protocol):
    """The authors' source quality (engagement per impression), answered from memory: the
    ranking stage does no I/O. Provided by the engagement log's periodic job."""

    def quality(self, author_ids: Collection[int]) -> Mapping[int, float]: ...


class NegativeFeedback(Protocol):
    """The viewer's "show fewer like this" per author (a count or weight; absent = none),
    read with the ranking columns of a first page."""

    async def fewer(self, viewer_id: int) -> Mapping[int, float]: ...


class PriorQuality:
    """Every author at the prior (no engagement log yet)."""

    def __init__(self, prior: float = QUALITY_PRIOR) -> None:
        self.prior = prior

    def quality(self, author_ids: Collection[int]) -> Mapping[int, float]:
        return dict.fromkeys(author_ids, self.prior)


class NoFeedback:
    """Nobody asked for fewer of anything."""

    async def fewer(self, viewer_id: int) -> Mapping[int, float]:
        return {}


@dataclass(frozen=True)
class ViewerSignals:
    """What the features know of the viewer besides the candidates' columns. `quality` is
    asked only for the authors of the rows stage 2 scores (not the whole window's)."""

    now_ms: int
    affinity: Mapping[int, int] = field(default_factory=dict)
    quality: SourceQuality | None = None
    fewer: Mapping[int, float] = field(default_factory=dict)
    recommended: AbstractSet[int] = frozenset()
    seen: AbstractSet[int] = frozenset()


def feature_matrix(
    post_ids: Sequence[int],
    author_ids: Sequence[int],
    likes: Sequence[int],
    comments: Sequence[int],
    signals: ViewerSignals,
    names: Sequence[str] = FEATURES,
) -> np.ndarray:
    """A float64 matrix, one row per candidate, one column per name of `names` (all
    FEATURES by default), filled column by column: per-author lookups once per author (an
    empty mapping costs nothing), the rest in numpy."""
    n = len(post_ids)
    rows = np.zeros((n, len(names)))
    if not n:
        return rows
    authors: set[int] | None = None
    for column, name in enumerate(names):
        if name == "age_hours":
            ids = np.fromiter(post_ids, dtype=np.int64, count=n)
            made = (ids >> SEQUENCE_BITS) + EPOCH_MS
            rows[:, column] = np.maximum(0.0, (signals.now_ms - made) / 3_600_000)
        elif name == "likes":
            rows[:, column] = likes
        elif name == "comments":
            rows[:, column] = comments
        elif name in ("affinity", "source_quality", "fewer"):
            source: Mapping[int, float]
            default = 0.0
            if authors is None:
                authors = set(author_ids)
            if name == "affinity":
                source = signals.affinity
            elif name == "fewer":
                source = signals.fewer
            else:
                default = QUALITY_PRIOR
                provider = signals.quality
                source = provider.quality(authors) if provider is not None else {}
            if not source:
                if default:
                    rows[:, column] = default
                continue
            per_author = {a: float(source.get(a, default)) for a in authors}
            rows[:, column] = list(map(per_author.__getitem__, author_ids))
        elif name == "recommended":
            _membership(rows, column, post_ids, signals.recommended)
        elif name == "seen":
            _membership(rows, column, post_ids, signals.seen)
        else:
            raise KeyError(f"no feature {name!r}")
    return rows


def _membership(
    rows: np.ndarray, column: int, post_ids: Sequence[int], among: AbstractSet[int]
) -> None:
    if among and not among.isdisjoint(post_ids):
        rows[:, column] = [p in among for p in post_ids]
