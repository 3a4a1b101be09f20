"""Why a viewer's RANKED feed is in its order (`python -m app.explain <handle>`, app/explain.py):
their experiment arm and model version, and the top candidates of a new ranking with their
source, feature values, stage-1 (formula) and stage-2 (model) scores.

It runs the read path's own stages on the deployment's settings (the same candidates, filter,
registry and rules as a first page), and writes nothing: no session, no impression.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.feed.constants import CANDIDATE_SLACK, MAX_ID, OWN_PER_READ
from app.feed.first_page import session_window
from app.feed.service import FeedService
from app.ranking.features import FEATURES, ViewerSignals, feature_matrix
from app.ranking.scoring import formula_scores

DEFAULT_TOP = 20


async def explain(
    feed: FeedService,
    sessions: async_sessionmaker[AsyncSession],
    handle: str,
    top: int = DEFAULT_TOP,
) -> dict[str, Any]:
    """The report as data (`render` prints it); LookupError for an unknown handle."""
    async with sessions() as session:
        viewer_id = (
            await session.execute(
                text("SELECT id FROM users WHERE handle = :h"),
                {"h": handle.removeprefix("@")},
            )
        ).scalar()
    if viewer_id is None:
        raise LookupError(f"no user @{handle.removeprefix('@')}")
    settings = feed.settings
    rank = feed.rank
    choice = rank.choose(viewer_id)
    size = settings.feed_session_size
    context = await feed.contexts.read_context(viewer_id, True, MAX_ID, OWN_PER_READ)
    share = settings.feed_recommended_share
    found = await feed.reader.candidates.gather(
        viewer_id,
        context,
        MAX_ID,
        int(size * CANDIDATE_SLACK),
        recommend=context.recommendations and share > 0,
    )
    recommended = found.recommended
    read = await rank.rank_visible(viewer_id, found.ids, None, recommended)
    window, _, _ = session_window(read.columns, size, recommended)
    fewer = read.fewer or context.fewer
    ranked = rank.rank_window(
        viewer_id, window, context.affinity, read.seen, recommended, fewer, choice
    )
    detail = ranked.detail
    now_ms = int(time.time() * 1000)
    stage1 = formula_scores(*window, context.affinity, now_ms)
    signals = ViewerSignals(
        now_ms,
        context.affinity,
        rank.quality,
        fewer,
        recommended,
        read.seen,
    )
    features = feature_matrix(*window, signals)
    stage1_rank = {p: r for r, p in enumerate(detail.stage1)} if detail else {}
    position = {p: i for i, p in enumerate(window.post_ids)}
    pulled = set(context.pull_authors)
    handles = await _handles(sessions, set(window.author_ids))
    rows = []
    for shown, post_id in enumerate(ranked.ids[:top], 1):
        i = position[post_id]
        author = window.author_ids[i]
        if author == viewer_id:
            source = "own"
        elif post_id in recommended:
            source = "recommended"
        elif author in pulled:
            source = "pulled"
        else:
            source = "timeline"
        rows.append(
            {
                "rank": shown,
                "post_id": post_id,
                "author": handles.get(author, str(author)),
                "source": source,
                "features": dict(zip(FEATURES, (float(v) for v in features[i]), strict=True)),
                "stage1_score": stage1[i],
                "stage1_rank": stage1_rank.get(i, -1) + 1,
                "stage2_score": detail.stage2.get(i) if detail else None,
            }
        )
    experiment = rank.registry.experiment
    manifest = getattr(choice.scorer, "manifest", None)
    return {
        "trained_at": manifest.trained_at if manifest else None,
        "training_rows": manifest.training_rows if manifest else None,
        "viewer": handle.removeprefix("@"),
        "viewer_id": viewer_id,
        "experiment": experiment.name if experiment else None,
        "arm": choice.arm or None,
        "version": choice.version,
        "stage2": choice.scorer is not None,
        "degraded": ranked.degraded,
        "candidates": len(found.ids),
        "visible": len(read.columns.post_ids),
        "stage2_candidates": settings.ranking_stage2_candidates,
        "top": rows,
    }


async def _handles(sessions: async_sessionmaker[AsyncSession], ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    async with sessions() as session:
        found = await session.execute(
            text("SELECT id, handle FROM users WHERE id = ANY(:ids)"), {"ids": list(ids)}
        )
        return {int(r[0]): str(r[1]) for r in found}


def render(report: dict[str, Any]) -> str:
    head = (
        f"@{report['viewer']} (id {report['viewer_id']}): version {report['version']}"
        f"{'' if report['stage2'] else ' (formula only)'}"
        f"{f' (trained {t})' if (t := report['trained_at']) else ''}, "
        f"arm {report['arm'] or '-'} of experiment {report['experiment'] or '-'}; "
        f"{report['visible']} visible of {report['candidates']} candidates, stage 2 on the "
        f"best {report['stage2_candidates']}{'; DEGRADED' if report['degraded'] else ''}"
    )
    short = {"age_hours": "age_h", "source_quality": "quality", "recommended": "rec"}
    names = [short.get(f, f) for f in FEATURES]
    lines = [
        head,
        "rank  post id              author            source       "
        + " ".join(f"{n:>8}" for n in names)
        + "   stage1 (#)          stage2",
    ]
    for row in report["top"]:
        values = " ".join(f"{v:8.2f}" for v in row["features"].values())
        stage2 = "-" if row["stage2_score"] is None else f"{row['stage2_score']:8.4f}"
        lines.append(
            f"{row['rank']:>4}  {row['post_id']:<19}  {row['author'][:16]:<16}  "
            f"{row['source']:<11}  {values}   {row['stage1_score']:.4f} ({row['stage1_rank']:>3})"
            f"   {stage2}"
        )
    return "\n".join(lines)
