"""The `feed` query through GraphQL over HTTP, with the real write path behind it.

conftest shrinks capacities: TIMELINE_MAX 400, FEED_SESSION_SIZE 120, pull at 10 followers.
"""

from __future__ import annotations

import dataclasses

import httpx
from sqlalchemy import event

from app.feed.rows import _MODES_EPOCH
from app.media import hydrate
from app.state import create_state
from app.timelines.store import timeline_key
from app.web import create_app
from tests.helpers import (
    author_with_fans,
    block,
    eventually,
    fanout_mode,
    feed_ids,
    follow,
    gql,
    make_user,
    post,
    timeline_ids,
    unfollow,
)


async def feed_page(client, token, first=20, after=None, mode="RANKED"):
    return await gql(client, "Feed", {"first": first, "after": after, "mode": mode}, token=token)


async def scroll(client, token, first=20, mode="RANKED", pages=1000) -> list[int]:
    seen: list[int] = []
    after = None
    for _ in range(pages):
        data = (await feed_page(client, token, first, after, mode)).ok()["feed"]
        seen += [int(e["node"]["id"]) for e in data["edges"]]
        if not data["pageInfo"]["hasNextPage"]:
            break
        after = data["pageInfo"]["endCursor"]
    return seen


async def test_feed_shows_followed_authors_only(client, pipeline) -> None:
    alice, _ = await make_user(client, "alice")
    bob, _ = await make_user(client, "bob")
    carol, _ = await make_user(client, "carol")
    await follow(client, alice, "bob")
    await pipeline.settle()
    from_bob = [await post(client, bob, f"bob {i}") for i in range(3)]
    await post(client, carol, "carol is not followed")
    await pipeline.settle()
    data = (await feed_page(client, alice)).ok()["feed"]
    assert [int(e["node"]["id"]) for e in data["edges"]] != []
    assert set(await feed_ids(client, alice)) == set(from_bob)
    assert await feed_ids(client, alice, mode="CHRONOLOGICAL") == list(reversed(from_bob))
    assert data["sessionId"] and data["degraded"] is False
    assert data["edges"][0]["node"]["author"]["handle"] == "bob"


async def test_scrolling_while_the_world_changes(client, state, pipeline) -> None:
    viewer, _ = await make_user(client, "viewer")
    tokens = {h: (await make_user(client, h))[0] for h in ("ann", "ben", "cat", "dan")}
    for handle in tokens:
        await follow(client, viewer, handle)
    await pipeline.settle()
    authored: dict[str, list[int]] = {h: [] for h in tokens}
    for i in range(300):
        handle = ("ann", "ben", "cat", "dan")[i % 4]
        authored[handle].append(await post(client, tokens[handle], f"{handle} {i}"))
    await pipeline.settle()

    seen: list[int] = []
    data = (await feed_page(client, viewer, first=25)).ok()["feed"]
    seen += [int(e["node"]["id"]) for e in data["edges"]]
    pages = 1
    deleted: set[int] = set()
    gone_authors: dict[str, int] = {}
    new_posts: list[int] = []
    while data["pageInfo"]["hasNextPage"]:
        if pages == 2:
            new_posts = [await post(client, tokens["ann"], f"fresh {i}") for i in range(3)]
            await pipeline.settle()
            unseen = [p for p in authored["ben"] if p not in seen]
            for victim in unseen[:5]:
                (await gql(client, "DeletePost", {"id": str(victim)}, token=tokens["ben"])).ok()
                deleted.add(victim)
            # A privacy change during pagination applies at once, like a delete.
            private = next(p for p in authored["ann"] if p not in seen)
            variables = {"id": str(private), "visibility": "PRIVATE"}
            (await gql(client, "SetPostVisibility", variables, token=tokens["ann"])).ok()
            deleted.add(private)
        if pages == 3:
            await unfollow(client, viewer, "cat")
            gone_authors["cat"] = len(seen)
        if pages == 4:
            await block(client, tokens["dan"], "viewer")
            gone_authors["dan"] = len(seen)
        after = data["pageInfo"]["endCursor"]
        data = (await feed_page(client, viewer, first=25, after=after)).ok()["feed"]
        seen += [int(e["node"]["id"]) for e in data["edges"]]
        pages += 1
    assert len(seen) > 120  # the session (120 ids) ran out and scrolling went on below it

    assert len(seen) == len(set(seen)), "a post was shown twice"
    assert not deleted & set(seen)
    assert not set(new_posts) & set(seen), "new posts must wait for a refresh"
    for handle, cut in gone_authors.items():
        assert not set(authored[handle]) & set(seen[cut:]), f"{handle} shown after the change"
    for handle in ("ann", "ben"):
        missing = set(authored[handle]) - deleted - set(seen)
        assert not missing, f"{len(missing)} visible posts of {handle} skipped"

    fresh = await feed_ids(client, viewer, first=100, mode="CHRONOLOGICAL")
    assert fresh[:3] == list(reversed(new_posts))
    assert not (set(authored["cat"]) | set(authored["dan"])) & set(fresh)


async def test_chronological_keyset_has_no_gaps_or_repeats(client, pipeline) -> None:
    author, _, [(viewer, _)] = await author_with_fans(client, ["viewer"])
    made = [await post(client, author, f"p{i}") for i in range(57)]
    await pipeline.settle()
    assert await scroll(client, viewer, first=7, mode="CHRONOLOGICAL") == list(reversed(made))


async def test_celebrity_posts_are_pulled_not_pushed(client, state, pipeline) -> None:
    celeb, _, fans = await author_with_fans(client, 10, author="celeb")
    await pipeline.settle()
    star_post = await post(client, celeb, "I am famous now")
    await pipeline.settle()
    assert await fanout_mode(client, "celeb") == "PULL"
    for token, uid in fans:
        assert star_post not in await timeline_ids(state, uid)
        assert (await feed_ids(client, token)).count(star_post) == 1


async def test_push_and_pull_copies_show_once(client, state, pipeline) -> None:
    author, _, fans = await author_with_fans(client, 9)
    await pipeline.settle()
    pushed = await post(client, author, "pushed while small")
    await pipeline.settle()
    late, _ = await make_user(client, "late")
    await follow(client, late, "author")  # 10 followers: the next post switches to pull
    pulled = await post(client, author, "pulled while big")
    await pipeline.settle()
    token, uid = fans[0]
    assert pushed in await timeline_ids(state, uid)  # pushed copy in the timeline...
    ids = await feed_ids(client, token, mode="CHRONOLOGICAL")
    assert ids.count(pushed) == 1 and ids.count(pulled) == 1  # ...and in posts:{author}


async def test_read_your_writes_and_follow_then_read(client, pipeline) -> None:
    alice, _ = await make_user(client, "alice")
    bob, _ = await make_user(client, "bob")
    old = [await post(client, bob, f"bob {i}") for i in range(3)]
    await pipeline.settle()
    mine = await post(client, alice, "my own words")
    # No worker has run since: the own post and the new followee come from the read path.
    assert mine in await feed_ids(client, alice)
    await follow(client, alice, "bob")
    assert set(old) <= set(await feed_ids(client, alice))


async def test_cursor_errors_and_page_bounds(client, state, pipeline) -> None:
    alice, alice_id = await make_user(client, "alice")
    bob, _ = await make_user(client, "bob")
    await follow(client, alice, "bob")
    await follow(client, bob, "alice")
    for i in range(6):
        await post(client, bob, f"b{i}")
        await post(client, alice, f"a{i}")
    await pipeline.settle()
    data = (await feed_page(client, alice, first=2)).ok()["feed"]
    cursor = data["pageInfo"]["endCursor"]

    tampered = cursor[:-3] + ("AAA" if not cursor.endswith("AAA") else "BBB")
    assert (await feed_page(client, alice, 2, tampered)).codes == ["BAD_USER_INPUT"]
    assert (await feed_page(client, bob, 2, cursor)).codes == ["BAD_USER_INPUT"]
    other_mode = await feed_page(client, alice, 2, cursor, mode="CHRONOLOGICAL")
    assert other_mode.codes == ["BAD_USER_INPUT"]
    for bad in (0, 101):
        assert (await feed_page(client, alice, bad)).codes == ["BAD_USER_INPUT"]
    assert (await feed_page(client, None)).codes == ["UNAUTHENTICATED"]

    await state.feed.feed_sessions.drop(alice_id, data["sessionId"])  # the session expired
    expired = await feed_page(client, alice, 2, cursor)
    assert expired.codes == ["CURSOR_EXPIRED"]
    assert "expired" in expired.errors[0]["message"]


async def test_missing_timeline_is_served_from_postgres_then_rebuilt(
    client, state, pipeline
) -> None:
    bob, _, [(alice, alice_id)] = await author_with_fans(client, ["alice"], author="bob")
    made = [await post(client, bob, f"b{i}") for i in range(4)]
    await pipeline.settle()
    await state.redis.delete(timeline_key(alice_id))
    data = (await feed_page(client, alice, mode="CHRONOLOGICAL")).ok()["feed"]
    assert data["degraded"] is True
    assert [int(e["node"]["id"]) for e in data["edges"]] == list(reversed(made))
    await eventually(lambda: state.timelines.exists(alice_id), what="the timeline rebuilt")
    assert await timeline_ids(state, alice_id) == list(reversed(made))
    again = (await feed_page(client, alice, mode="CHRONOLOGICAL")).ok()["feed"]
    assert again["degraded"] is False


async def test_ranking_timeout_falls_back_to_freshness(client, state, pipeline) -> None:
    bob, _, [(alice, _)] = await author_with_fans(client, ["alice"], author="bob")
    made = [await post(client, bob, f"b{i}") for i in range(5)]
    await pipeline.settle()
    budget = state.settings.ranking_budget_ms
    object.__setattr__(state.settings, "ranking_budget_ms", -1)
    try:
        data = (await feed_page(client, alice)).ok()["feed"]
    finally:
        object.__setattr__(state.settings, "ranking_budget_ms", budget)
    assert data["degraded"] is True
    assert [int(e["node"]["id"]) for e in data["edges"]] == list(reversed(made))


async def test_a_page_costs_the_same_queries_at_20_and_100(client, state, pipeline) -> None:
    viewer, _ = await make_user(client, "viewer")
    made: list[int] = []
    for a in range(5):
        token, _ = await make_user(client, f"author{a}")
        await follow(client, viewer, f"author{a}")
        made += [await post(client, token, f"a{a} p{i}") for i in range(25)]
    await pipeline.settle()
    (await feed_page(client, viewer)).ok()  # the hourly activity mark is not a page cost
    statements: list[str] = []

    def count(conn, cursor, statement, *args) -> None:
        if statement != _MODES_EPOCH:  # once a second per process, not per page
            statements.append(statement)

    event.listen(state.engine.sync_engine, "before_cursor_execute", count)
    try:
        costs = {}
        for first in (20, 50, 100):
            for mode in ("RANKED", "CHRONOLOGICAL"):
                state.feed.context_cache.clear()  # the cost of a first page that reads it
                hydrate.forget_local()  # and of posts whose images this process never read
                statements.clear()
                data = (await feed_page(client, viewer, first=first, mode=mode)).ok()["feed"]
                assert len(data["edges"]) == first
                costs[(first, mode)] = len(statements)
                hydrate.forget_local()
                statements.clear()
                nxt = (
                    await feed_page(client, viewer, first, data["pageInfo"]["endCursor"], mode)
                ).ok()["feed"]
                assert nxt["edges"]
                costs[(first, mode, "next")] = len(statements)
    finally:
        event.remove(state.engine.sync_engine, "before_cursor_execute", count)
    # Context and filter; bodies, authors and the viewer's likes come with the rows.
    assert costs[(20, "RANKED")] == costs[(100, "RANKED")] <= 3, costs
    assert costs[(20, "CHRONOLOGICAL")] == costs[(100, "CHRONOLOGICAL")] <= 3, costs
    assert costs[(20, "CHRONOLOGICAL", "next")] == costs[(100, "CHRONOLOGICAL", "next")] <= 3
    # Inside the frozen session (120 ids here) a later page is the filter query and the
    # page's media (Post.media in the registered Feed document: one query, whatever its size).
    assert costs[(20, "RANKED", "next")] == costs[(50, "RANKED", "next")] == 2, costs


async def test_redis_down_serves_the_feed_from_postgres(client, state, pipeline) -> None:
    bob, _, [(alice, _)] = await author_with_fans(client, ["alice"], author="bob")
    carol, _ = await make_user(client, "carol")
    made = [await post(client, bob, f"b{i}") for i in range(5)]
    hidden = await post(client, carol, "not followed")
    await pipeline.settle()

    dead = create_state(state.settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}))
    broken = dataclasses.replace(dead, engine=state.engine, sessions=state.sessions)
    app = create_app(broken)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t"
        ) as c:
            for mode in ("RANKED", "CHRONOLOGICAL"):
                first = (await feed_page(c, alice, first=3, mode=mode)).ok()["feed"]
                assert first["degraded"] is True
                ids = [int(e["node"]["id"]) for e in first["edges"]]
                after = first["pageInfo"]["endCursor"]
                rest = (await feed_page(c, alice, first=10, after=after, mode=mode)).ok()["feed"]
                ids += [int(e["node"]["id"]) for e in rest["edges"]]
                assert sorted(ids, reverse=True) == list(reversed(made)), mode
                assert hidden not in ids
    finally:
        await dead.redis.aclose()
        await dead.engine.dispose()
