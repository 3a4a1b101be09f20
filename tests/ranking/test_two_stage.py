"""Two-stage ranking's parts without the read path (decision 0078): the features in columns,
the shipped and planted LightGBM models, the registry's start-up checks, experiment parsing
and deterministic, weighted arm assignment, stage 2 over stage 1 and its fallbacks, the
frequency rule."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from app.config import Settings, SettingsError
from app.ranking.experiments import parse_experiment
from app.ranking.features import FEATURES, QUALITY_PRIOR, ViewerSignals, feature_matrix
from app.ranking.model import FORMULA, MODELS_DIR, load_model
from app.ranking.registry import load_registry
from app.ranking.scoring import arrange, formula_order, rank_columns
from app.ranking.stages import two_stage
from tests.helpers import post_id_at
from tests.ranking.planted import RaisingScorer, SlowScorer, write_likes_model

NOW = 1_790_000_000_000
HOUR = 3_600_000


def settings(**changed: object) -> Settings:
    return Settings.model_construct(**{**Settings().model_dump(), **changed})


def columns(n: int, authors: int = 1000) -> tuple[list[int], list[int], list[int], list[int]]:
    """n candidates, newest first, one author each (unless `authors` is small), likes that
    grow with age so the formula and a likes model disagree."""
    post_ids = [post_id_at(NOW - i * 60_000) for i in range(n)]
    return post_ids, [i % authors + 1 for i in range(n)], [i for i in range(n)], [0] * n


class Known:
    """A SourceQuality that knows some authors."""

    def __init__(self, known: dict[int, float]) -> None:
        self.known = known

    def quality(self, author_ids):
        return {a: self.known[a] for a in author_ids if a in self.known}


# -- features -------------------------------------------------------------------------------


def test_features_come_in_columns_from_what_the_read_path_holds() -> None:
    post_ids = [post_id_at(NOW - 2 * HOUR), post_id_at(NOW - 30 * 60_000)]
    signals = ViewerSignals(
        NOW,
        affinity={7: 3},
        quality=Known({7: 0.2}),
        fewer={8: 2},
        recommended={post_ids[1]},
        seen={post_ids[0]},
    )
    rows = feature_matrix(post_ids, [7, 8], [5, 0], [1, 2], signals)
    assert rows.shape == (2, len(FEATURES))
    first = dict(zip(FEATURES, rows[0], strict=True))
    second = dict(zip(FEATURES, rows[1], strict=True))
    assert first == {
        "age_hours": pytest.approx(2.0),
        "likes": 5,
        "comments": 1,
        "affinity": 3,
        "source_quality": 0.2,
        "fewer": 0,
        "recommended": 0,
        "seen": 1,
    }
    assert second["age_hours"] == pytest.approx(0.5)
    assert second["source_quality"] == QUALITY_PRIOR  # not provided: the prior
    assert (second["fewer"], second["recommended"], second["seen"]) == (2, 1, 0)
    # A model's manifest picks columns in its own order.
    picked = feature_matrix(post_ids, [7, 8], [5, 0], [1, 2], signals, ("seen", "likes"))
    assert picked.tolist() == [[1, 5], [0, 0]]


# -- models ---------------------------------------------------------------------------------


def test_the_shipped_model_loads_with_its_manifest_and_scores_engagement() -> None:
    manifest = json.loads((MODELS_DIR / "gbm-1.json").read_text())
    assert manifest["features"] == list(FEATURES) and manifest["training_rows"] >= 1000
    model = load_model("gbm-1")
    base = [1.0, 5, 1, 2, QUALITY_PRIOR, 0, 0, 0]
    older, seen, shunned = list(base), list(base), list(base)
    older[0], seen[7], shunned[5] = 40.0, 1, 3
    scores = model.score(np.array([base, older, seen, shunned]))
    assert len(scores) == 4
    # The synthetic rule's directions, as learnt: age, a repeat showing and "show fewer" cost.
    assert scores[0] > scores[1] and scores[0] > scores[2] and scores[0] > scores[3]
    assert model.size_bytes < 100_000


def test_a_planted_model_scores_a_known_function(tmp_path: Path) -> None:
    model = load_model("few-1", write_likes_model(tmp_path, "few-1"))
    scores = model.score(np.array([[0.0], [3.0], [40.0]]))
    assert scores[0] > scores[1] > scores[2]


@pytest.mark.parametrize(
    ("break_it", "said"),
    [
        (lambda d: (d / "few-1.txt").unlink(), "no model file"),
        (lambda d: (d / "few-1.json").unlink(), "no manifest"),
        (lambda d: (d / "few-1.txt").write_text("tree\nversion=v4\ngarbage"), "corrupt"),
        (lambda d: (d / "few-1.txt").write_text("not a model"), "corrupt"),
        (
            lambda d: (d / "few-1.json").write_text(
                json.dumps({"version": "few-1", "features": ["likes", "mood"]})
            ),
            "are not",
        ),
    ],
)
def test_a_missing_or_corrupt_model_stops_the_start(tmp_path: Path, break_it, said) -> None:
    write_likes_model(tmp_path, "few-1")
    break_it(tmp_path)
    served = settings(
        ranking_models="formula-1,few-1", ranking_model="few-1", ranking_models_dir=str(tmp_path)
    )
    with pytest.raises(SettingsError, match="RANKING_MODELS") as caught:
        load_registry(served)
    assert said in str(caught.value)


def test_the_registry_refuses_unknown_versions_and_bad_experiments(tmp_path: Path) -> None:
    write_likes_model(tmp_path, "few-1")
    base = {"ranking_models": "few-1", "ranking_models_dir": str(tmp_path)}
    with pytest.raises(SettingsError, match="RANKING_MODEL='gbm-9'"):
        load_registry(settings(**base, ranking_model="gbm-9"))
    with pytest.raises(SettingsError, match="wants version 'gbm-9'"):
        load_registry(
            settings(**base, ranking_model="few-1", ranking_experiment="x:s:a=gbm-9:1,b=few-1:1")
        )
    with pytest.raises(SettingsError, match=r"RANKING_EXPERIMENT=.*weight"):
        bad = "x:s:a=few-1:lots"
        load_registry(settings(**base, ranking_model="few-1", ranking_experiment=bad))
    registry = load_registry(settings(**base, ranking_model="few-1"))
    assert set(registry.scorers) == {FORMULA, "few-1"}  # the formula is always served
    assert registry.choose(5).version == "few-1" and registry.choose(5).arm == ""


# -- experiments ----------------------------------------------------------------------------


def test_experiments_parse_from_text_or_json_and_refuse_nonsense() -> None:
    text = parse_experiment("gbm-vs-formula:s1:control=formula-1:50,treatment=gbm-1:50")
    same = parse_experiment(
        json.dumps(
            {
                "name": "gbm-vs-formula",
                "salt": "s1",
                "arms": [
                    {"name": "control", "model": "formula-1", "weight": 50},
                    {"name": "treatment", "model": "gbm-1", "weight": 50},
                ],
            }
        )
    )
    assert text == same and text is not None
    assert [(a.name, a.model, a.weight) for a in text.arms] == [
        ("control", "formula-1", 50),
        ("treatment", "gbm-1", 50),
    ]
    assert parse_experiment("  ") is None
    for bad in (
        "nameonly",
        "x:s:control",
        "x:s:a=formula-1:1,a=gbm-1:1",
        "x:s:a=formula-1:0",
        "x::a=formula-1:1",
        "x:s:a;b=formula-1:1",
        '{"name": "x"}',
    ):
        with pytest.raises(ValueError):
            parse_experiment(bad)


def test_arms_are_deterministic_and_follow_the_weights() -> None:
    experiment = parse_experiment("split:pepper:a=formula-1:20,b=gbm-1:30,c=gbm-1:50")
    assert experiment is not None
    viewers = range(1, 20_001)
    arms = [experiment.arm_of(v).name for v in viewers]
    assert arms == [experiment.arm_of(v).name for v in viewers]  # the same every time
    for name, share in (("a", 0.2), ("b", 0.3), ("c", 0.5)):
        assert abs(arms.count(name) / len(arms) - share) < 0.015, name
    # Another salt reshuffles viewers, not the shares.
    other = parse_experiment("split:salt2:a=formula-1:20,b=gbm-1:30,c=gbm-1:50")
    assert other is not None
    moved = sum(other.arm_of(v).name != arm for v, arm in zip(viewers, arms, strict=True))
    assert moved > 5_000


# -- the stages -----------------------------------------------------------------------------


def test_stage_2_reorders_the_best_k_of_stage_1_and_leaves_the_rest_below(tmp_path: Path) -> None:
    model = load_model("few-1", write_likes_model(tmp_path, "few-1"))
    window = columns(40)
    deadline = time.perf_counter() + 5
    stage1 = formula_order(*window, {}, NOW, deadline)
    ranked = two_stage(*window, {}, set(), model, ViewerSignals(NOW), 10, deadline)
    assert ranked.fallback is None and ranked.stage1 == stage1
    best_k = stage1[:10]
    assert ranked.order[:10] == sorted(best_k, key=lambda i: window[2][i])  # fewest likes first
    assert ranked.order[10:] == stage1[10:]
    assert set(ranked.stage2) == set(best_k)
    # Formula only: stage 1 as the formula always ranked.
    alone = two_stage(*window, {}, set(), None, ViewerSignals(NOW), 10, deadline)
    assert alone.order == rank_columns(*window, {}, NOW, 5) and alone.stage2 == {}


def test_stage_2_past_the_budget_or_raising_keeps_stage_1_order() -> None:
    window = columns(30)
    stage1 = rank_columns(*window, {}, NOW, 5)
    slow = two_stage(
        *window, {}, set(), SlowScorer(0.05), ViewerSignals(NOW), 30, time.perf_counter() + 0.02
    )
    assert slow.fallback == "budget" and slow.order == stage1
    broken = two_stage(
        *window, {}, set(), RaisingScorer(), ViewerSignals(NOW), 30, time.perf_counter() + 5
    )
    assert broken.fallback == "error" and broken.order == stage1


def test_seen_posts_stay_last_after_stage_2(tmp_path: Path) -> None:
    model = load_model("few-1", write_likes_model(tmp_path, "few-1"))
    window = columns(20)
    seen = {window[0][i] for i in (0, 1, 2)}  # the fewest-liked: the model's favourites
    signals = ViewerSignals(NOW, seen=seen)
    ranked = two_stage(*window, {}, seen, model, signals, 20, time.perf_counter() + 5)
    shown = [window[0][i] for i in ranked.order]
    assert set(shown[-3:]) == seen and not seen & set(shown[:-3])


def test_the_frequency_rule_moves_an_authors_excess_below_everyone_else() -> None:
    # Author 1 has the 6 best posts; at most 3 of theirs before every other author's.
    post_ids = [post_id_at(NOW - i * 60_000) for i in range(12)]
    authors = [1] * 6 + [2, 3, 4, 5, 6, 7]
    order = list(range(12))
    capped = arrange(order, post_ids, authors, frozenset(), time.perf_counter() + 5, 3)
    shown = [authors[i] for i in capped]
    assert shown.count(1) == 6
    assert shown[:9].count(1) == 3 and shown[-3:] == [1, 1, 1]  # the excess, below the rest
    uncapped = arrange(order, post_ids, authors, frozenset(), time.perf_counter() + 5, 0)
    assert [authors[i] for i in uncapped].count(1) == 6
    assert capped != uncapped


def test_the_formula_is_unchanged_by_the_split() -> None:
    """rank_columns (formula-1) is formula_order then arrange: the same floats and order."""
    window = columns(50, authors=7)
    affinity = {1: 3, 2: 10}
    scores_order = formula_order(*window, affinity, NOW, time.perf_counter() + 5)
    assert rank_columns(*window, affinity, NOW, 5) == arrange(
        scores_order, window[0], window[1], frozenset(), time.perf_counter() + 5
    )
    assert not math.isnan(sum(scores_order))


def test_a_service_with_an_unservable_model_does_not_start(tmp_path: Path) -> None:
    """The state (what the API, workers and tools build first) refuses it, naming the
    variable: the model files are loaded with the feed, not at the first page."""
    from app.config import get_settings
    from app.state import create_state

    write_likes_model(tmp_path, "few-1")
    (tmp_path / "few-1.txt").write_text("tree\nversion=v4\nend of trees\n")
    broken = get_settings().model_copy(
        update={
            "ranking_models": "formula-1,few-1",
            "ranking_model": "few-1",
            "ranking_models_dir": str(tmp_path),
        }
    )
    with pytest.raises(SettingsError, match="RANKING_MODELS: version 'few-1' cannot be served"):
        create_state(broken)
