"""The ranking stage's CPU: the hand-set formula alone ("formula-1", today's RANKED ranking)
against the two stages with the shipped LightGBM model, and the model's inference per 500
candidates and per K (decision 0078).

    python -m benchmarks.ranking_model [--repeat 300] [--db NAME --redis-url URL]

Without --db: synthetic windows of 500 candidates shaped like a heavy viewer's (newest first
over two days, ~120 authors, Zipf-ish likes), per call CPU (time.process_time) of
- `formula`: app.ranking.scoring.rank_columns, the whole of today's ranking;
- `two-stage K=k`: app.ranking.stages.two_stage with gbm-1 on the best k of stage 1;
- `features k`, `inference k`: feature_matrix and the booster's predict on k rows alone.
With --db NAME (a database seeded as benchmarks/feed_wrk.py seeds it) and a Redis db of its
own (FLUSHED): each heavy viewer's real first-page window (candidates read, filtered once,
not measured), then RankStage.rank_window with formula-1 and with gbm-1 on it, in turn.
Quiet and short: a few seconds of one core.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from app.posts.ids import EPOCH_MS, SEQUENCE_BITS
from app.ranking.features import FEATURES, PriorQuality, ViewerSignals, feature_matrix
from app.ranking.model import load_model
from app.ranking.scoring import rank_columns
from app.ranking.stages import two_stage

KS = (64, 100, 128, 150, 200, 500)


def window(n: int, seed: int) -> tuple[list[int], list[int], list[int], list[int], dict[int, int]]:
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    made = sorted((now - rng.randrange(48 * 3_600_000) for _ in range(n)), reverse=True)
    post_ids = [((ms - EPOCH_MS) << SEQUENCE_BITS) | i for i, ms in enumerate(made)]
    authors = [int(rng.paretovariate(1.0) * 7) % 120 + 1 for _ in range(n)]
    likes = [int(rng.paretovariate(1.2)) - 1 for _ in range(n)]
    comments = [n_likes // 5 for n_likes in likes]
    affinity = {a: rng.randrange(6) for a in rng.sample(range(1, 121), 25)}
    return post_ids, authors, likes, comments, affinity


def cpu_us(call: Callable[[], Any], repeat: int) -> float:
    """Median CPU microseconds per call over 5 batches of `repeat`."""
    call()
    figures = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(repeat):
            call()
        figures.append((time.process_time() - started) / repeat * 1e6)
    return statistics.median(figures)


def synthetic(repeat: int) -> dict[str, float]:
    model = load_model("gbm-1")
    post_ids, authors, likes, comments, affinity = window(500, 1)
    now = int(time.time() * 1000)
    seen = set(random.Random(2).sample(post_ids, 40))
    signals = ViewerSignals(now, affinity, PriorQuality(), {}, frozenset(), seen)
    figures: dict[str, float] = {}
    figures["formula"] = cpu_us(
        lambda: rank_columns(post_ids, authors, likes, comments, affinity, now, 5.0, seen, 20),
        repeat,
    )
    for k in KS:
        figures[f"two-stage K={k}"] = cpu_us(
            lambda k=k: two_stage(
                post_ids,
                authors,
                likes,
                comments,
                affinity,
                seen,
                model,
                signals,
                k,
                time.perf_counter() + 5,
                20,
            ),
            repeat,
        )
        cols = (post_ids[:k], authors[:k], likes[:k], comments[:k])
        figures[f"features {k}"] = cpu_us(lambda c=cols: feature_matrix(*c, signals), repeat)
        rows = feature_matrix(*cols, signals)
        figures[f"inference {k}"] = cpu_us(lambda r=rows: model.score(r), repeat)
    figures["model bytes"] = model.size_bytes
    figures["trees"] = model.booster.num_trees()
    return figures


async def heavy_viewers(db: str, redis_url: str, repeat: int) -> dict[str, float]:
    base = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    os.environ["DATABASE_URL"] = base.rsplit("/", 1)[0] + "/" + db
    os.environ["REDIS_URL"] = redis_url
    from app.config import Settings
    from app.feed.constants import CANDIDATE_SLACK, MAX_ID, OWN_PER_READ
    from app.feed.modes import FeedMode
    from app.feed.rows import RankColumns
    from app.ranking.registry import formula_only, load_registry
    from app.state import create_state

    settings = Settings()
    state = create_state(settings, pool_size=2)
    await state.redis.flushdb()
    try:
        (row,) = await state.feed.reads.all(
            "SELECT array_agg(id) FROM users WHERE following_count BETWEEN 1000 AND 2000"
        )
        viewers = list(row[0] or [])
        feed, size = state.feed, settings.feed_session_size
        windows = []
        for viewer in viewers:
            await feed.page(viewer, FeedMode.RANKED, 20, None)  # timeline rebuilt, warm
            context = await feed.contexts.read_context(viewer, True, MAX_ID, OWN_PER_READ)
            found = await feed.reader.candidates.gather(
                viewer, context, MAX_ID, int(size * CANDIDATE_SLACK)
            )
            read = await feed.rank.rank_visible(viewer, found.ids)
            window_ = RankColumns(*(c[:size] for c in read.columns))
            windows.append((viewer, window_, context.affinity, read.seen))
        registries = {"formula-1": formula_only(), "gbm-1": load_registry(settings)}
        figures: dict[str, float] = {"viewers": len(windows)}
        figures["window"] = statistics.mean(len(w.post_ids) for _, w, _, _ in windows)
        for name, registry in registries.items():
            feed.rank.reload(registry)
            choice = registry.choose(0)

            def rank_all(choice: Any = choice) -> None:
                for viewer, w, affinity, seen in windows:
                    feed.rank.rank_window(viewer, w, affinity, seen, frozenset(), {}, choice)

            figures[f"stage {name}"] = cpu_us(rank_all, max(1, repeat // 10)) / len(windows)
        return figures
    finally:
        await state.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--db", default="")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6412/0")
    args = parser.parse_args(argv)
    figures = synthetic(args.repeat)
    for name, value in figures.items():
        print(f"{name:22} {value:10.1f}{'' if 'bytes' in name or name == 'trees' else ' us CPU'}")
    if args.db:
        real = asyncio.run(heavy_viewers(args.db, args.redis_url, args.repeat))
        for name, value in real.items():
            print(f"heavy {name:16} {value:10.1f}")
        figures.update({f"heavy {k}": v for k, v in real.items()})
        print(f"ratio gbm-1 / formula-1: {real['stage gbm-1'] / real['stage formula-1']:.2f}")
    print(json.dumps({"features": list(FEATURES), **figures}))


if __name__ == "__main__":
    main()
