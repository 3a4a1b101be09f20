"""`python -m app.explain <handle>`: the viewer's arm and version and the top
candidates with their source, features and both stages' scores, from the real stores."""

from __future__ import annotations

import json

from app.feed.explain import explain, render
from app.ranking.features import FEATURES
from app.ranking.registry import load_registry
from tests.helpers import cli, follow, make_user, post, run_module, sql


async def test_explain_shows_the_arm_version_sources_features_and_scores(
    client, state, pipeline
) -> None:
    viewer, viewer_id = await make_user(client, "viewer")
    ann, _ = await make_user(client, "ann")
    await follow(client, viewer, "ann")
    await pipeline.settle()
    made = [await post(client, ann, f"ann {i}") for i in range(3)]
    mine = await post(client, viewer, "mine")
    await pipeline.settle()
    await sql("UPDATE posts SET like_count = 4 WHERE id = $1", made[0])

    original = state.feed.rank.registry
    settings = state.settings.model_copy(
        update={"ranking_experiment": "exp:salt:only=gbm-1:1", "ranking_model": "gbm-1"}
    )
    state.feed.rank.reload(load_registry(settings))
    try:
        report = await explain(state.feed, state.sessions, "@viewer", top=3)
    finally:
        state.feed.rank.reload(original)
    assert (report["viewer_id"], report["experiment"]) == (viewer_id, "exp")
    assert (report["arm"], report["version"], report["stage2"]) == ("only", "gbm-1", True)
    assert report["visible"] == 4 and len(report["top"]) == 3
    for row in report["top"]:
        assert set(row["features"]) == set(FEATURES)
        assert row["stage2_score"] is not None and row["stage1_rank"] >= 1
        # ann was just followed: a pull source for a while (RECENT_WINDOW), and fanned out.
        assert row["source"] in ({"own"} if row["post_id"] == mine else {"timeline", "pulled"})
    liked = [r for r in report["top"] if r["post_id"] == made[0]]
    if liked:
        assert liked[0]["features"]["likes"] == 4
    assert "arm only of experiment exp" in render(report)


async def test_the_command_line(client, state) -> None:
    await make_user(client, "viewer")
    out = json.loads(await cli("app.explain", "viewer", "--json"))
    assert out["version"] == state.settings.ranking_model and out["top"] == []
    code, _, err = await run_module("app.explain", "nobody")
    assert code == 1 and "no user @nobody" in err
