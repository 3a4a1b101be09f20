"""The model versions a deployment serves (RANKING_MODELS, RANKING_MODEL, RANKING_EXPERIMENT),
loaded and checked at start: a missing or corrupt model file, an unknown version or a
malformed experiment stop the start-up with a SettingsError naming the variable.

A registry is immutable; a reload builds a new one (`load_registry`) and swaps it in whole
(app.feed.rank.RankStage.registry). Sessions store the version and arm they were ranked
with, so a swap only changes what new sessions get.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.config import Settings, SettingsError
from app.ranking.experiments import NAME, Experiment, parse_experiment
from app.ranking.model import FORMULA, MODELS_DIR, ModelError, Scorer, load_model


@dataclass(frozen=True)
class Choice:
    """What a viewer's new session is ranked with: a version (its stage-2 scorer, None for
    the formula alone) and the experiment arm ("" without an experiment)."""

    version: str
    arm: str
    scorer: Scorer | None


@dataclass(frozen=True)
class ModelRegistry:
    scorers: dict[str, Scorer | None]  # version -> scorer (None: FORMULA)
    default: str
    experiment: Experiment | None = None

    def choose(self, viewer_id: int) -> Choice:
        """The viewer's arm and version for a new session."""
        if self.experiment is None:
            return Choice(self.default, "", self.scorers[self.default])
        arm = self.experiment.arm_of(viewer_id)
        return Choice(arm.model, arm.name, self.scorers[arm.model])

    def scorer(self, version: str) -> Scorer | None:
        """A served version's scorer (None: the formula, or a version no longer served)."""
        return self.scorers.get(version)


def formula_only() -> ModelRegistry:
    """The hand-set formula for everyone (tools and tests that build a RankStage alone)."""
    return ModelRegistry({FORMULA: None}, FORMULA)


def models_dir(settings: Settings) -> Path:
    return Path(settings.ranking_models_dir) if settings.ranking_models_dir else MODELS_DIR


def load_registry(settings: Settings, extra: dict[str, Scorer] | None = None) -> ModelRegistry:
    """The served versions, each model file loaded and checked now. `extra`: scorers built
    in process (tests) under their versions, served as if listed."""
    versions = [v.strip() for v in settings.ranking_models.split(",") if v.strip()]
    for version in versions:
        if not NAME.match(version):
            raise SettingsError(
                f"RANKING_MODELS: {version!r} is not a version name (letters, digits, '.', "
                "'_', '-')"
            )
    scorers: dict[str, Scorer | None] = {FORMULA: None}  # always served: the fallback
    directory = models_dir(settings)
    for version in versions:
        if version == FORMULA or (extra and version in extra):
            continue
        try:
            scorers[version] = load_model(version, directory)
        except ModelError as exc:
            raise SettingsError(
                f"RANKING_MODELS: version {version!r} cannot be served: {exc}"
            ) from None
    scorers.update(extra or {})
    if settings.ranking_model not in scorers:
        raise SettingsError(
            f"RANKING_MODEL={settings.ranking_model!r} is not among RANKING_MODELS "
            f"({', '.join(scorers)})"
        )
    try:
        experiment = parse_experiment(settings.ranking_experiment)
    except ValueError as exc:
        raise SettingsError(f"RANKING_EXPERIMENT={settings.ranking_experiment!r}: {exc}") from None
    if experiment is not None:
        for arm in experiment.arms:
            if arm.model not in scorers:
                raise SettingsError(
                    f"RANKING_EXPERIMENT: arm {arm.name!r} wants version {arm.model!r}, "
                    f"not among RANKING_MODELS ({', '.join(scorers)})"
                )
    return ModelRegistry(scorers, settings.ranking_model, experiment)
