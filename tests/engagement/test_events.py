"""Where the engagement log's events come from, through GraphQL over HTTP: a feed page (one
IMPRESSION per post shown, with its session and position, and one PAGE row), likes, unlikes
and comments once committed, `reportImpressions` (SEEN) and `reportEngagement` (CLICK,
RECOMMENDATION_SHOWN) with its bounds and typed errors."""

from __future__ import annotations

from app.engagement.constants import MAX_REPORTED
from app.engagement.kinds import Kind
from tests.engagement.log import logged
from tests.helpers import add_comment, followed_pair, gql, ids


async def _feed(client, token, first: int, after: str | None = None) -> dict:
    variables = {"first": first, "mode": "RANKED", "after": after}
    return (await gql(client, "Feed", variables, token=token)).ok()["feed"]


async def test_feed_pages_log_each_post_shown_and_the_page(client, state, pipeline) -> None:
    viewer, viewer_id, _, made = await followed_pair(client, pipeline, posts_each=4)
    authors = {p: a for a, posts in made.items() for p in posts}
    first = await _feed(client, viewer, first=5)
    second = await _feed(client, viewer, first=5, after=first["pageInfo"]["endCursor"])
    shown = ids(first) + ids(second)
    assert sorted(shown) == sorted(authors)

    impressions = await logged(state, Kind.IMPRESSION)
    assert [r["post_id"] for r in impressions] == shown
    assert {r["viewer_id"] for r in impressions} == {viewer_id}
    assert [r["position"] for r in impressions] == list(range(8))  # places in the session
    assert {r["session_id"] for r in impressions} == {first["sessionId"]}
    handles = {r["author_id"] for r in impressions}
    assert len(handles) == 2  # ann's and ben's ids, each post with its own author
    assert {r["reason"] for r in impressions} == {"FOLLOWED"}  # as the edges say
    # The session's ranking model (the default version; no experiment: no arm).
    model = state.settings.ranking_model
    assert all(r["model_version"] == model and r["arm"] is None for r in impressions)

    pages = await logged(state, Kind.PAGE)
    assert [(r["shown"], r["duplicates"], r["empty"], r["position"]) for r in pages] == [
        (5, 0, False, 0),
        (3, 0, False, 5),
    ]
    assert all(r["cost_ms"] > 0 and r["session_id"] == first["sessionId"] for r in pages)


async def test_an_empty_page_is_logged_as_one(client, state, pipeline) -> None:
    viewer, viewer_id, _, _ = await followed_pair(client, pipeline, posts_each=0)
    assert ids(await _feed(client, viewer, first=5)) == []
    pages = await logged(state, Kind.PAGE)
    assert [(r["viewer_id"], r["shown"], r["empty"]) for r in pages] == [(viewer_id, 0, True)]
    assert await logged(state, Kind.IMPRESSION) == []


async def test_likes_unlikes_and_comments_are_logged_once_committed(
    client, state, pipeline
) -> None:
    viewer, viewer_id, _, made = await followed_pair(client, pipeline, posts_each=1)
    liked, commented = made["ann"][0], made["ben"][0]
    (await gql(client, "LikePost", {"id": str(liked)}, token=viewer)).ok()
    (await gql(client, "UnlikePost", {"id": str(liked)}, token=viewer)).ok()
    await add_comment(client, viewer, commented, "nice")
    # Refused (no such post): nothing committed, nothing logged.
    missing = await gql(client, "LikePost", {"id": "1" * 19}, token=viewer)
    assert missing.codes == ["NOT_FOUND"]

    rows = [r for r in await logged(state) if r["kind"] != Kind.PAGE]
    assert [(Kind(r["kind"]).name, r["post_id"]) for r in rows] == [
        ("LIKE", liked),
        ("UNLIKE", liked),
        ("COMMENT", commented),
    ]
    authors_of = await _authors(made)
    assert [r["author_id"] for r in rows] == [authors_of[liked], authors_of[liked],
                                              authors_of[commented]]  # fmt: skip
    assert {r["viewer_id"] for r in rows} == {viewer_id}


async def test_reports_log_seen_and_client_events_with_their_authors(
    client, state, pipeline
) -> None:
    viewer, viewer_id, _, made = await followed_pair(client, pipeline, posts_each=2)
    posts = made["ann"] + made["ben"]
    report = {"postIds": [str(p) for p in posts[:3]]}
    assert (await gql(client, "ReportImpressions", report, token=viewer)).ok()
    click = {"kind": "CLICK", "postIds": [str(posts[3])], "sessionId": "s-1"}
    assert (await gql(client, "ReportEngagement", click, token=viewer)).ok() == {
        "reportEngagement": True
    }
    shown = {"kind": "RECOMMENDATION_SHOWN", "postIds": [str(posts[0])]}
    assert (await gql(client, "ReportEngagement", shown, token=viewer)).ok()

    authors_of = await _authors(made)
    seen = await logged(state, Kind.SEEN)
    assert sorted(r["post_id"] for r in seen) == sorted(posts[:3])
    # The flush read the authors the client could not name.
    assert all(r["author_id"] == authors_of[r["post_id"]] for r in seen)
    [clicked] = await logged(state, Kind.CLICK)
    assert (clicked["post_id"], clicked["author_id"], clicked["session_id"]) == (
        posts[3],
        authors_of[posts[3]],
        "s-1",
    )
    [recommended] = await logged(state, Kind.RECOMMENDATION_SHOWN)
    assert (recommended["viewer_id"], recommended["post_id"]) == (viewer_id, posts[0])


async def test_report_engagement_is_bounded_with_typed_errors(client, state, pipeline) -> None:
    viewer, _, _, made = await followed_pair(client, pipeline, posts_each=1)
    post_id = str(made["ann"][0])
    too_many = {"kind": "CLICK", "postIds": [post_id] * (MAX_REPORTED + 1)}
    assert (await gql(client, "ReportEngagement", too_many, token=viewer)).codes == [
        "BAD_USER_INPUT"
    ]
    malformed = {"kind": "CLICK", "postIds": ["12x"]}
    assert (await gql(client, "ReportEngagement", malformed, token=viewer)).codes == [
        "BAD_USER_INPUT"
    ]
    long_session = {"kind": "CLICK", "postIds": [post_id], "sessionId": "s" * 65}
    assert (await gql(client, "ReportEngagement", long_session, token=viewer)).codes == [
        "BAD_USER_INPUT"
    ]
    anonymous = await gql(client, "ReportEngagement", {"kind": "CLICK", "postIds": [post_id]})
    assert anonymous.codes == ["UNAUTHENTICATED"]
    unknown_kind = await gql(client, "ReportEngagement", {"kind": "LIKE", "postIds": []}, viewer)
    assert unknown_kind.status in (200, 400) and unknown_kind.errors  # not in the enum
    assert await logged(state, Kind.CLICK) == []


async def test_report_engagement_counts_against_the_write_budget(
    client, state, pipeline, monkeypatch
) -> None:
    viewer, _, _, made = await followed_pair(client, pipeline, posts_each=1)
    monkeypatch.setattr(state.settings, "rate_limit_writes_per_minute", 1)
    await state.redis.flushdb()  # the set-up's writes: the budget starts over
    click = {"kind": "CLICK", "postIds": [str(made["ann"][0])]}
    assert (await gql(client, "ReportEngagement", click, token=viewer)).ok()
    assert (await gql(client, "ReportEngagement", click, token=viewer)).codes == ["RATE_LIMITED"]


async def _authors(made: dict[str, list[int]]) -> dict[int, int]:
    from tests.helpers import sql

    every = [p for posts in made.values() for p in posts]
    rows = await sql("SELECT id, author_id FROM posts WHERE id = ANY($1::bigint[])", every)
    return {r["id"]: r["author_id"] for r in rows}
