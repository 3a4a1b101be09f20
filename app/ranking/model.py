"""Served ranking models: LightGBM's own text model file (decision 0078) plus a JSON manifest
beside it, `<dir>/<version>.txt` and `<dir>/<version>.json`:
    {"version": ..., "features": [...], "trained_at": ..., "training_rows": ...}
The manifest names the features in the model's column order (app.ranking.features); they
must be FEATURES the read path computes, or the model is refused at start.

FORMULA ("formula-1") is the hand-set formula alone (app.ranking.scoring): a version with no
file and no stage 2, the fallback every deployment serves.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

import numpy as np

from app.ranking.features import FEATURES

FORMULA = "formula-1"
MODELS_DIR = Path(__file__).resolve().parent / "models"


class ModelError(Exception):
    """A model file that cannot be served (missing, corrupt, features unknown)."""


class Scorer(Protocol):
    """Stage 2: a score per feature row (higher ranks first)."""

    version: str
    features: tuple[str, ...]

    def score(self, rows: np.ndarray) -> Sequence[float]: ...


@dataclass(frozen=True)
class Manifest:
    version: str
    features: tuple[str, ...]
    trained_at: str
    training_rows: int

    @classmethod
    def read(cls, path: Path) -> Manifest:
        try:
            raw = json.loads(path.read_text())
            manifest = cls(
                str(raw["version"]),
                tuple(str(f) for f in raw["features"]),
                str(raw.get("trained_at", "")),
                int(raw.get("training_rows", 0)),
            )
        except FileNotFoundError:
            raise ModelError(f"{path}: no manifest") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{path}: not a model manifest ({exc})") from None
        unknown = [f for f in manifest.features if f not in FEATURES]
        if unknown or not manifest.features:
            raise ModelError(f"{path}: features {unknown or '[]'} are not {list(FEATURES)}")
        return manifest


class GbmModel:
    """A LightGBM booster from its text file; scores are raw margins (the ranking only
    compares them, the sigmoid would change no order)."""

    def __init__(self, version: str, path: Path, manifest: Manifest) -> None:
        import lightgbm  # only where a model is served: the tools that never rank skip it

        _one_thread(lightgbm)

        self.version = version
        self.features = manifest.features
        self.manifest = manifest
        self.path = path
        try:
            text = path.read_text()
            if not text.startswith("tree\n") or "end of trees" not in text:
                raise ValueError("not a LightGBM text model")
            self.booster = lightgbm.Booster(model_str=text)
        except FileNotFoundError:
            raise ModelError(f"{path}: no model file") from None
        except (OSError, ValueError, lightgbm.basic.LightGBMError) as exc:
            raise ModelError(f"{path}: corrupt model ({exc})") from None
        if self.booster.num_feature() != len(self.features):
            raise ModelError(
                f"{path}: the model reads {self.booster.num_feature()} features, its manifest "
                f"names {len(self.features)}"
            )
        self.size_bytes = len(text.encode())

    def score(self, rows: np.ndarray) -> Sequence[float]:
        if not len(rows):
            return []
        scores = self.booster.predict(rows, raw_score=True, num_threads=1)
        return np.asarray(scores).tolist()  # type: ignore[no-any-return]


def _one_thread(lightgbm: ModuleType) -> None:
    """LightGBM in this process on one thread, before it loads a model. Its default is an
    OpenMP pool of one thread per core (made by the model's parsing), whose idle threads spin
    after each parallel region: measured, that doubled a first page's CPU added by stage 2
    in an API process (decision 0078). One call of its C API (`LGBM_SetMaxThreads`, 4.0+);
    predicting 128 rows then costs ~90 us of CPU, all on the calling thread."""
    # The package wraps no Python call around it: its handle on the C library is the way.
    library = lightgbm.basic._LIB  # noqa: SLF001
    setter = getattr(library, "LGBM_SetMaxThreads", None)
    if setter is not None and setter(ctypes.c_int(1)) != 0:
        raise ModelError(f"lightgbm {lightgbm.__version__}: LGBM_SetMaxThreads failed")


def load_model(version: str, directory: Path = MODELS_DIR) -> GbmModel:
    """The version's model from `directory`; ModelError when it cannot be served."""
    manifest = Manifest.read(directory / f"{version}.json")
    if manifest.version != version:
        raise ModelError(f"{directory / version}.json names version {manifest.version!r}")
    return GbmModel(version, directory / f"{version}.txt", manifest)
