"""Train the shipped ranking model on synthetic engagement (a dev tool, not product; decision
0078):

    .venv/bin/python -m devtools.train_ranking_model [--version gbm-1] [--viewers 400]

The network is the benchmark generator's (devtools.seed.bulk: Zipf popularity, log-normal
out-degree), drawn in memory at a small size (no database). Impressions: for each sampled
viewer, posts of their followees (followed) and of popular authors they do not follow
(recommended), with the features the read path computes (app.ranking.features.FEATURES).
The synthetic rule - the engagement probability each impression's label is drawn from:

    logit p = -2.2 + 0.45 ln(1 + likes + 2 comments) - 0.06 age_hours
              + 0.55 ln(1 + affinity) + 12 (source_quality - 0.05)
              - 0.9 fewer - 0.5 recommended - 1.3 seen

i.e. engagement rises with the post's engagement, the viewer's ties to the author and the
author's quality, and falls with age, "show fewer" feedback, out-of-network origin and a
repeat showing. Writes app/ranking/models/<version>.txt (LightGBM's text model) and
<version>.json (version, features in order, trained_at, training_rows). Deterministic for a
seed except the manifest's trained_at.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from tqdm import tqdm

from app.ranking.features import FEATURES, QUALITY_PRIOR
from app.ranking.model import MODELS_DIR
from devtools.seed.bulk import _follow_records, _following_counts

TREES = 30
LEAVES = 8


def engagement_logit(row: Sequence[float]) -> float:
    """The documented synthetic rule (module docstring), on a FEATURES row."""
    f = dict(zip(FEATURES, row, strict=True))
    return (
        -2.2
        + 0.45 * math.log1p(f["likes"] + 2 * f["comments"])
        - 0.06 * f["age_hours"]
        + 0.55 * math.log1p(f["affinity"])
        + 12 * (f["source_quality"] - QUALITY_PRIOR)
        - 0.9 * f["fewer"]
        - 0.5 * f["recommended"]
        - 1.3 * f["seen"]
    )


def impressions(
    users: int, avg_following: float, viewers: int, per_viewer: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(features, labels) of synthetic impressions on the generator's network."""
    rng = random.Random(seed)
    by_rank = list(range(1, users + 1))
    rng.shuffle(by_rank)
    following = _following_counts(rng, users, avg_following)
    now = datetime.now(UTC)
    followees: dict[int, set[int]] = {}
    followers = [0] * (users + 1)
    with tqdm(total=users, disable=True) as bar:
        for follower, followee, _ in _follow_records(rng, by_rank, following, [now] * users, bar):
            followees.setdefault(follower, set()).add(followee)
            followers[followee] += 1
    quality = {
        u: min(0.3, rng.lognormvariate(math.log(QUALITY_PRIOR) - 0.18, 0.6)) for u in by_rank
    }
    popular = by_rank[: max(10, users // 50)]
    rows: list[list[float]] = []
    labels: list[int] = []
    for viewer in rng.sample(range(1, users + 1), viewers):
        mine = sorted(followees.get(viewer, ()))
        if not mine:
            continue
        fewer = {a: rng.choice((1, 2, 3)) for a in mine if rng.random() < 0.05}
        ties = {a: int(rng.expovariate(1 / 3)) if rng.random() < 0.3 else 0 for a in mine}
        for _ in range(per_viewer):
            recommended = rng.random() < 0.2
            if recommended:
                author = rng.choice(popular)
                if author in followees.get(viewer, ()) or author == viewer:
                    recommended = False
            if not recommended:
                author = rng.choice(mine)
            age = rng.uniform(0, 48)
            reach = 1 + followers[author] * quality[author] * 0.2
            likes = np.random.default_rng(rng.getrandbits(32)).poisson(reach * min(1, age / 6))
            comments = np.random.default_rng(rng.getrandbits(32)).poisson(likes * 0.15)
            row = [
                age,
                float(likes),
                float(comments),
                float(0 if recommended else ties[author]),
                quality[author],
                float(0 if recommended else fewer.get(author, 0)),
                float(recommended),
                float(rng.random() < 0.15),
            ]
            p = 1 / (1 + math.exp(-engagement_logit(row)))
            rows.append(row)
            labels.append(int(rng.random() < p))
    return np.array(rows), np.array(labels)


def train(version: str, out: Path, viewers: int, per_viewer: int, seed: int) -> dict[str, object]:
    import lightgbm

    features, labels = impressions(2_000, 30, viewers, per_viewer, seed)
    booster = lightgbm.train(
        {
            "objective": "binary",
            "num_leaves": LEAVES,
            "learning_rate": 0.1,
            "min_data_in_leaf": 20,
            "num_threads": 1,
            "deterministic": True,
            "seed": seed,
            "verbose": -1,
        },
        lightgbm.Dataset(features, labels, feature_name=list(FEATURES)),
        num_boost_round=TREES,
    )
    out.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(out / f"{version}.txt"))
    manifest = {
        "version": version,
        "features": list(FEATURES),
        "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "training_rows": len(labels),
        "engaged_share": round(float(labels.mean()), 4),
        "trees": TREES,
        "leaves": LEAVES,
        "trainer": f"lightgbm {lightgbm.__version__}, devtools/train_ranking_model.py seed {seed}",
    }
    (out / f"{version}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default="gbm-1")
    parser.add_argument("--out", type=Path, default=MODELS_DIR)
    parser.add_argument("--viewers", type=int, default=400)
    parser.add_argument("--per-viewer", type=int, default=12)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    manifest = train(args.version, args.out, args.viewers, args.per_viewer, args.seed)
    print(json.dumps(manifest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
