"""The recommendation source and the candidate-source budgets (issue 35, decision 0079),
through GraphQL with the real write path: a PUBLIC post of an author the viewer does not
follow, liked by the viewer's followees, shows in RANKED with reason RECOMMENDED and its why;
nothing the recommendation rule forbids ever shows (FOLLOWERS, PRIVATE, deleted, blocks
either way, the viewer's own); a stale timeline entry of an unfollowed author never shows,
also inside an open session; CHRONOLOGICAL and a viewer with the setting off have none; the
share cap holds on every page of a long scroll; a source past its timeout is dropped."""

from __future__ import annotations

import asyncio
import math
import random
from typing import Any

import pytest

from app.engagement.kinds import Kind
from app.feed import recommended as recommended_module
from app.feed.constants import SHARE_WINDOW
from app.feed.recommended import _WHY_SQL
from app.feed.sources import cap_share
from app.operation_documents import operations
from app.posts.ids import created_ms
from tests.engagement.log import logged
from tests.helpers import app_client, counting_statements, gql, metric_value, quick_users, sql

PAGE = 50


async def _feed(client, token: str, mode: str = "RANKED", first: int = PAGE, after=None) -> dict:
    variables: dict[str, Any] = {"first": first, "mode": mode, "after": after}
    return (await gql(client, "FeedWithReasons", variables, token=token)).ok()["feed"]


def _edges(feed: dict) -> dict[int, dict]:
    return {int(e["node"]["id"]): e for e in feed["edges"]}


async def _op(client, name: str, token: str, **variables: Any) -> dict:
    return (await gql(client, name, variables, token=token)).ok()


async def _post(client, token: str, body: str, visibility: str = "PUBLIC") -> int:
    data = await _op(client, "CreatePost", token, body=body, visibility=visibility)
    return int(data["createPost"]["id"])


async def _like(client, token: str, post_id: int) -> None:
    await _op(client, "LikePost", token, id=str(post_id))


async def _world(client, state, pipeline) -> dict[str, Any]:
    """viewer follows f1, f2, f3 and ann; stranger (followed by f1, not by the viewer) posts
    PUBLIC, FOLLOWERS, PRIVATE and a soon-deleted PUBLIC post, which f1 and f2 like where
    they may see them; ann posts (FOLLOWED); the viewer posts (OWN)."""
    handles = ["viewer", "fan1", "fan2", "fan3", "ann", "stranger"]
    users = dict(zip(handles, await quick_users(state, handles), strict=True))
    tok = {h: t for h, (t, _) in users.items()}
    for followee in ("fan1", "fan2", "fan3", "ann"):
        await _op(client, "Follow", tok["viewer"], handle=followee)
    await _op(client, "Follow", tok["fan1"], handle="stranger")
    await _op(client, "Follow", tok["fan2"], handle="stranger")
    await pipeline.settle()
    posts = {
        "public": await _post(client, tok["stranger"], "public"),
        "followers": await _post(client, tok["stranger"], "followers", "FOLLOWERS"),
        "private": await _post(client, tok["stranger"], "private", "PRIVATE"),
        "deleted": await _post(client, tok["stranger"], "deleted"),
        "ann": await _post(client, tok["ann"], "ann's"),
        "own": await _post(client, tok["viewer"], "mine"),
    }
    for liker in ("fan1", "fan2"):
        for kind in ("public", "followers", "deleted"):
            await _like(client, tok[liker], posts[kind])
    await _op(client, "DeletePost", tok["stranger"], id=str(posts["deleted"]))
    await pipeline.settle()
    return {"tok": tok, "ids": {h: i for h, (_, i) in users.items()}, "posts": posts}


async def test_a_post_followees_liked_is_recommended_with_why_and_nothing_forbidden_is(
    client, state, pipeline
) -> None:
    w = await _world(client, state, pipeline)
    posts, tok = w["posts"], w["tok"]
    edges = _edges(await _feed(client, tok["viewer"]))
    rec = edges[posts["public"]]
    assert rec["reason"] == "RECOMMENDED"
    assert rec["recommendation"]["likedByCount"] == 2
    assert [u["handle"] for u in rec["recommendation"]["likedBy"]] == [
        "fan2",
        "fan1",
    ]  # newest first
    assert rec["recommendation"]["text"] == "Liked by @fan2 and @fan1"
    assert edges[posts["ann"]]["reason"] == "FOLLOWED"
    assert edges[posts["ann"]]["recommendation"] is None
    assert edges[posts["own"]]["reason"] == "OWN"
    for forbidden in ("followers", "private", "deleted"):
        assert posts[forbidden] not in edges, forbidden
    # The engagement log's impressions carry the edges' reasons.
    served = {r["post_id"]: r["reason"] for r in await logged(state, Kind.IMPRESSION)}
    assert {p: served[p] for p in edges} == {p: e["reason"] for p, e in edges.items()}
    # CHRONOLOGICAL stays followed-only.
    chrono = _edges(await _feed(client, tok["viewer"], "CHRONOLOGICAL"))
    assert posts["public"] not in chrono
    assert {e["reason"] for e in chrono.values()} <= {"FOLLOWED", "OWN"}


async def test_a_third_liker_makes_the_text_count_and_a_blocked_liker_is_never_named(
    client, state, pipeline
) -> None:
    w = await _world(client, state, pipeline)
    posts, tok = w["posts"], w["tok"]
    await _like(client, tok["fan3"], posts["public"])
    state.feed.recommendations.cache.clear()
    rec = _edges(await _feed(client, tok["viewer"]))[posts["public"]]["recommendation"]
    assert rec["text"] == "Liked by @fan3 and 2 others"
    assert rec["likedByCount"] == 3
    # f3 blocks the viewer (the block ends both follows): never named again.
    await _op(client, "Block", tok["fan3"], handle="viewer")
    state.feed.recommendations.cache.clear()
    rec = _edges(await _feed(client, tok["viewer"]))[posts["public"]]["recommendation"]
    assert "fan3" not in [u["handle"] for u in rec["likedBy"]]
    assert rec["likedByCount"] == 2


@pytest.mark.parametrize("who", ["viewer", "stranger"])
async def test_no_recommendation_across_a_block_either_way(client, state, pipeline, who) -> None:
    w = await _world(client, state, pipeline)
    tok, posts = w["tok"], w["posts"]
    other = "stranger" if who == "viewer" else "viewer"
    await _op(client, "Block", tok[who], handle=other)
    state.feed.recommendations.cache.clear()
    edges = _edges(await _feed(client, tok["viewer"]))
    assert posts["public"] not in edges
    assert all(e["reason"] != "RECOMMENDED" for e in edges.values())


async def test_a_followed_authors_post_is_followed_not_recommended(client, state, pipeline) -> None:
    w = await _world(client, state, pipeline)
    tok, posts = w["tok"], w["posts"]
    await _op(client, "Follow", tok["viewer"], handle="stranger")
    await pipeline.settle()
    state.feed.recommendations.cache.clear()
    edges = _edges(await _feed(client, tok["viewer"]))
    assert edges[posts["public"]]["reason"] == "FOLLOWED"
    assert edges[posts["public"]]["recommendation"] is None
    assert posts["followers"] in edges  # a follower now: the home feed's rule lets it in


async def test_the_viewers_own_liked_post_is_own_never_recommended(client, state, pipeline) -> None:
    w = await _world(client, state, pipeline)
    tok, posts = w["tok"], w["posts"]
    await _like(client, tok["fan1"], posts["own"])
    state.feed.recommendations.cache.clear()
    edges = _edges(await _feed(client, tok["viewer"]))
    assert edges[posts["own"]]["reason"] == "OWN"


async def test_a_stale_timeline_entry_of_an_unfollowed_author_never_shows(
    client, state, pipeline
) -> None:
    """ann's post is in the viewer's session as FOLLOWED; the viewer unfollows ann while
    followees like the post (a recommendation candidate now): inside the open session it is
    judged by the rule it was frozen under and dropped; a stale timeline entry of it never
    passes as a recommendation on a new first page either."""
    w = await _world(client, state, pipeline)
    tok, posts = w["tok"], w["posts"]
    older = [await _post(client, tok["ann"], f"ann {i}") for i in range(4)]
    await pipeline.settle()
    first = await _feed(client, tok["viewer"], first=1)
    assert first["pageInfo"]["hasNextPage"]
    for liker in ("fan1", "fan2"):
        for post_id in [*older, posts["ann"]]:
            await _like(client, tok[liker], post_id)
    await _op(client, "Unfollow", tok["viewer"], handle="ann")
    # The timeline keeps (or gets back) every entry: a stale copy, as a late unfollow leaves.
    entries = [(p, created_ms(p)) for p in [*older, posts["ann"]]]
    await state.timelines.push_entries(w["ids"]["viewer"], entries, create=True)
    rest = await _feed(client, tok["viewer"], after=first["pageInfo"]["endCursor"])
    shown = set(_edges(first)) | set(_edges(rest))
    assert not shown & {*older, posts["ann"]} - set(_edges(first))
    state.feed.recommendations.cache.clear()
    again = _edges(await _feed(client, tok["viewer"]))
    for post_id in [*older, posts["ann"]]:
        # Liked by followees and PUBLIC: recommendable in its own right, so it may come back
        # as RECOMMENDED, from the recommendation source, never as FOLLOWED.
        if post_id in again:
            assert again[post_id]["reason"] == "RECOMMENDED"
    # Without the likes it is only a stale timeline entry: never shown at all.
    for liker in ("fan1", "fan2"):
        for post_id in [*older, posts["ann"]]:
            await _op(client, "UnlikePost", tok[liker], id=str(post_id))
    state.feed.recommendations.cache.clear()
    state.feed.open_sessions.clear()
    again = _edges(await _feed(client, tok["viewer"]))
    assert not set(again) & {*older, posts["ann"]}


async def test_a_recommendation_made_followers_only_leaves_the_open_session(
    client, state, pipeline
) -> None:
    w = await _world(client, state, pipeline)
    tok, posts = w["tok"], w["posts"]
    ann_more = [await _post(client, tok["ann"], f"ann {i}") for i in range(6)]
    await pipeline.settle()
    first = await _feed(client, tok["viewer"], first=1)
    shown = set(_edges(first))
    await _op(
        client,
        "SetPostVisibility",
        tok["stranger"],
        id=str(posts["public"]),
        visibility="FOLLOWERS",
    )
    after = first["pageInfo"]["endCursor"]
    while after is not None:
        page = await _feed(client, tok["viewer"], first=2, after=after)
        shown |= set(_edges(page))
        after = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
    assert set(ann_more) <= shown
    if posts["public"] in _edges(first):
        return  # shown before the change: fine
    assert posts["public"] not in shown


async def test_chronological_and_the_setting_off_have_none(client, state, pipeline) -> None:
    w = await _world(client, state, pipeline)
    tok, posts = w["tok"], w["posts"]
    query = "query { viewer { recommendationsEnabled } }"
    me = (await gql(client, "", token=tok["viewer"], query=query)).ok()
    assert me["viewer"]["recommendationsEnabled"] is True
    data = await _op(client, "SetRecommendations", tok["viewer"], enabled=False)
    assert data["setRecommendations"]["recommendationsEnabled"] is False
    edges = _edges(await _feed(client, tok["viewer"]))
    assert posts["public"] not in edges
    assert posts["ann"] in edges
    # Someone else's setting is not the viewer's to read.
    other = 'query { user(handle: "viewer") { recommendationsEnabled } }'
    seen = (await gql(client, "", token=tok["fan1"], query=other)).ok()
    assert seen["user"]["recommendationsEnabled"] is None
    await _op(client, "SetRecommendations", tok["viewer"], enabled=True)
    edges = _edges(await _feed(client, tok["viewer"]))
    assert edges[posts["public"]]["reason"] == "RECOMMENDED"


async def test_the_share_cap_holds_on_every_page_of_a_long_scroll(client, state, pipeline) -> None:
    """30 recommendable posts, 20 followed ones: at most ceil(0.2 x 10) = 2 recommendations
    in any 10 consecutive positions of the whole scroll, page after page."""
    handles = ["viewer", "friend", "stranger", "ann"]
    users = dict(zip(handles, await quick_users(state, handles), strict=True))
    tok = {h: t for h, (t, _) in users.items()}
    for followee in ("friend", "ann"):
        await _op(client, "Follow", tok["viewer"], handle=followee)
    await pipeline.settle()
    strangers = [await _post(client, tok["stranger"], f"s{i}") for i in range(30)]
    followed = [await _post(client, tok["ann"], f"a{i}") for i in range(20)]
    for post_id in strangers:
        await _like(client, tok["friend"], post_id)
    await pipeline.settle()
    reasons: list[str] = []
    after = None
    for _ in range(40):
        page = await _feed(client, tok["viewer"], first=7, after=after)
        reasons += [e["reason"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert reasons.count("FOLLOWED") == len(followed)
    assert reasons.count("RECOMMENDED") >= 4  # recommendations do come
    for start in range(len(reasons)):
        window = reasons[start : start + 10]
        assert window.count("RECOMMENDED") <= 2, (start, reasons)


async def test_a_source_past_its_timeout_is_dropped_and_the_page_answers(
    client, state, pipeline, monkeypatch
) -> None:
    w = await _world(client, state, pipeline)
    tok, posts = w["tok"], w["posts"]
    real = recommended_module.recommended_ids

    async def slow(*args: Any, **kwargs: Any) -> list[int]:
        await asyncio.sleep(1.0)  # the source's timeout is 300 ms by default
        return await real(*args, **kwargs)

    monkeypatch.setattr(recommended_module, "recommended_ids", slow)
    sample = 'feed_source_dropped_total{reason="timeout",source="recommended"}'
    before = metric_value((await client.get("/metrics")).text, sample, 0.0)
    feed = await _feed(client, tok["viewer"])
    edges = _edges(feed)
    assert feed["degraded"] is True
    assert posts["ann"] in edges and posts["own"] in edges  # the other sources answered
    assert posts["public"] not in edges
    after = metric_value((await client.get("/metrics")).text, sample, 0.0)
    assert after == before + 1
    # The late read went on in the background (shared by any page that asks meanwhile) and
    # fills the viewer's cache when done: the next first page has the recommendation.
    monkeypatch.setattr(recommended_module, "recommended_ids", real)
    await asyncio.sleep(1.2)
    edges = _edges(await _feed(client, tok["viewer"]))
    assert edges[posts["public"]]["reason"] == "RECOMMENDED"


async def test_the_filter_judges_each_id_by_its_sources_rule(client, state, pipeline) -> None:
    """The SQL itself: a followed source's id of an unfollowed author fails the home-feed
    rule even when PUBLIC; the same id passes as a recommendation; a followed author's post
    passed as a recommendation fails."""
    from app.feed import rows

    w = await _world(client, state, pipeline)
    posts, ids = w["posts"], w["ids"]
    reads = state.feed.reads
    viewer = ids["viewer"]
    public, ann = posts["public"], posts["ann"]
    plain = await rows.rank_rows(reads, viewer, [public, ann])
    assert plain.post_ids == [ann]
    both = await rows.rank_rows(reads, viewer, [public, ann], {public})
    assert sorted(both.post_ids) == sorted([public, ann])
    wrong = await rows.rank_rows(reads, viewer, [public, ann], {public, ann})
    assert wrong.post_ids == [public]
    extras = rows.PageExtras()
    found = await rows.page_rows(
        reads, viewer, [public, ann, posts["private"]], extras, None, {public}
    )
    assert set(found) == {public, ann}
    count = await sql("SELECT count(*) AS n FROM likes WHERE post_id = $1", public)
    assert count[0]["n"] == 2


async def test_the_compiled_and_the_regular_path_answer_the_same_bytes(
    client, state, pipeline
) -> None:
    """FeedWithReasons with recommendations, OWN and FOLLOWED edges: the compiled document's
    row plan (app.api.fast) against Strawberry's execution (COMPILED_DOCUMENTS=0), the same
    open session both times (a refresh with nothing new reuses it)."""
    w = await _world(client, state, pipeline)
    tok = w["tok"]
    body = {
        "query": operations()["FeedWithReasons"],
        "operationName": "FeedWithReasons",
        "variables": {"first": 20},
    }
    headers = {"Authorization": f"Bearer {tok['viewer']}"}
    for _ in range(20):  # a fresh user's first page rebuilds their timeline (degraded)
        compiled = await client.post("/graphql", json=body, headers=headers)
        if b'"degraded":false' in compiled.content:
            break
        await asyncio.sleep(0.1)
    assert b'"RECOMMENDED"' in compiled.content and b'"OWN"' in compiled.content
    async with app_client(state, compiled_documents=False, fast_execution=False) as regular:
        answer = await regular.post("/graphql", json=body, headers=headers)
    assert answer.status_code == compiled.status_code == 200
    assert answer.content == compiled.content


def _cap_share_reference(ids: list[int], recommended: frozenset[int], allowed: int) -> list[int]:
    """cap_share one id at a time: the rule as plainly as it can be written."""
    out: list[int] = []
    waiting: list[int] = []

    def fits() -> bool:
        window = out[-(SHARE_WINDOW - 1) :]
        return sum(1 for p in window if p in recommended) < allowed

    for post_id in ids:
        if post_id in recommended:
            waiting.append(post_id)
            continue
        while waiting and fits():
            out.append(waiting.pop(0))
        out.append(post_id)
    while waiting and fits():
        out.append(waiting.pop(0))
    return out


def test_cap_share_is_the_plain_rule_and_holds_the_share() -> None:
    rng = random.Random(35)
    for _ in range(2000):
        n = rng.randrange(0, 80)
        ids = rng.sample(range(1000), n)
        recommended = frozenset(p for p in ids if rng.random() < rng.choice((0.1, 0.3, 0.7)))
        share = rng.choice((0.1, 0.2, 0.25, 0.5, 0.95))
        allowed = math.ceil(share * SHARE_WINDOW)
        capped = cap_share(ids, recommended, share)
        assert capped == _cap_share_reference(ids, recommended, allowed)
        assert [p for p in capped if p not in recommended] == [
            p for p in ids if p not in recommended
        ]
        for start in range(len(capped)):
            window = capped[start : start + SHARE_WINDOW]
            assert sum(1 for p in window if p in recommended) <= allowed


@pytest.mark.parametrize(("document", "reads_why"), [("Feed", False), ("FeedWithReasons", True)])
async def test_the_why_is_read_only_for_a_document_that_shows_it(
    client, state, pipeline, document, reads_why
) -> None:
    w = await _world(client, state, pipeline)
    variables = {"first": 20}
    for compiled in (True, False):
        async with app_client(state, compiled_documents=compiled) as http:
            state.feed.open_sessions.clear()
            with counting_statements(state) as statements:
                page = (await gql(http, document, variables, token=w["tok"]["viewer"])).ok()
            assert w["posts"]["public"] in {int(e["node"]["id"]) for e in page["feed"]["edges"]}
            assert any(s == _WHY_SQL for s in statements) is reads_why, (document, compiled)
