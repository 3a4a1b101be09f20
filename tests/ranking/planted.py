"""Planted ranking models for tests: real LightGBM text files whose score is a known function
of one feature (likes), written with a manifest as the shipped model is, and in-process
scorers that misbehave (slow, raising)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np


def write_likes_model(directory: Path, version: str, prefer: str = "fewest") -> Path:
    """`<directory>/<version>.txt` + `.json`: a LightGBM regression on `likes` alone whose
    score falls (prefer="fewest") or rises ("most") with the likes, strictly over 0..60."""
    import lightgbm

    likes = np.repeat(np.arange(0, 61, dtype=np.float64), 4).reshape(-1, 1)
    target = -likes[:, 0] if prefer == "fewest" else likes[:, 0]
    booster = lightgbm.train(
        {
            "objective": "regression",
            "num_leaves": 64,
            "min_data_in_leaf": 1,
            "min_data_in_bin": 1,
            "learning_rate": 0.5,
            "num_threads": 1,
            "deterministic": True,
            "verbose": -1,
        },
        lightgbm.Dataset(likes, target, feature_name=["likes"], params={"min_data_in_bin": 1}),
        num_boost_round=20,
    )
    directory.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(directory / f"{version}.txt"))
    manifest = {"version": version, "features": ["likes"], "trained_at": "", "training_rows": 244}
    (directory / f"{version}.json").write_text(json.dumps(manifest))
    return directory


class SlowScorer:
    """Takes `seconds` per call: past any small ranking budget."""

    features = ("likes",)

    def __init__(self, seconds: float, version: str = "slow-1") -> None:
        self.seconds, self.version = seconds, version

    def score(self, rows: np.ndarray) -> list[float]:
        time.sleep(self.seconds)
        return [-float(r[0]) for r in rows]


class RaisingScorer:
    features = ("likes",)
    version = "broken-1"

    def score(self, rows: np.ndarray) -> list[float]:
        raise RuntimeError("the model fell over")
