"""What a first feed page costs besides the page (issue 10), through GraphQL over HTTP with
the real write path: the hourly activity mark behind an in-process gate, the new-post count
reset, and a refresh with nothing new answered from the open feed session.

Writes are observed in Redis and Postgres state (the gate key, `last_active_at`, the reset
mark, the session keys) and in /metrics, never through mocks.
"""

from __future__ import annotations

import pytest
from sqlalchemy import event

from app.feed.sessions import OpenSessions, _key
from app.realtime.keys import reset_key
from app.users.activity import RecentMarks, _gate_key
from tests.helpers import (
    block,
    follow,
    followed_pair,
    gql,
    ids,
    make_user,
    metric_value,
    post,
    sql,
    unfollow,
)


async def first_page(client, token, first=10, mode="RANKED") -> dict:
    variables = {"first": first, "mode": mode}
    return (await gql(client, "Feed", variables, token=token)).ok()["feed"]


async def next_page(client, token, after, first=10) -> dict:
    variables = {"first": first, "after": after}
    return (await gql(client, "Feed", variables, token=token)).ok()["feed"]


async def sessions_of(state, viewer_id: int) -> set[bytes]:
    """The viewer's feed-session keys in Redis."""
    return set(await state.redis.keys(_key(viewer_id, "*")))


async def metric(client, step: str, outcome: str) -> float:
    text = (await client.get("/metrics")).text
    return metric_value(text, f'feed_first_page_total{{outcome="{outcome}",step="{step}"}}', 0.0)


async def _last_active_days_ago(user_id: int) -> float:
    [row] = await sql(
        "SELECT extract(epoch FROM now() - last_active_at) / 86400 AS days FROM users"
        " WHERE id = $1",
        user_id,
    )
    return float(row["days"])


# -- the activity mark -----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["RANKED", "CHRONOLOGICAL"])
async def test_a_second_first_page_within_the_hour_writes_nothing(client, state, mode) -> None:
    token, user_id = await make_user(client, "reader")
    await sql("UPDATE users SET last_active_at = now() - interval '2 days' WHERE id = $1", user_id)
    await first_page(client, token, mode=mode)
    assert await _last_active_days_ago(user_id) < 0.01  # marked: SQL
    assert await state.redis.exists(_gate_key(user_id))  # and the shared gate: Redis

    # Undo both writes; a first page within the hour must not redo either.
    await sql("UPDATE users SET last_active_at = now() - interval '2 days' WHERE id = $1", user_id)
    await state.redis.delete(_gate_key(user_id))
    for _ in range(3):
        await first_page(client, token, mode=mode)
    assert not await state.redis.exists(_gate_key(user_id)), "a Redis write (SET NX) was made"
    assert await _last_active_days_ago(user_id) > 1.9, "an SQL write was made"

    state.activity.recently.clear()  # as after the hour: the mark is due again
    await first_page(client, token, mode=mode)
    assert await state.redis.exists(_gate_key(user_id))
    assert await _last_active_days_ago(user_id) < 0.01


async def test_a_mark_found_in_redis_also_closes_the_process_gate(client, state) -> None:
    """Another process marked the user: this one learns it once, then skips the call."""
    token, user_id = await make_user(client, "reader")
    await state.redis.set(_gate_key(user_id), b"1", ex=3600)
    await sql("UPDATE users SET last_active_at = now() - interval '2 days' WHERE id = $1", user_id)
    await first_page(client, token)
    assert await _last_active_days_ago(user_id) > 1.9  # the shared gate held: no SQL
    await state.redis.delete(_gate_key(user_id))
    await first_page(client, token, mode="CHRONOLOGICAL")
    assert not await state.redis.exists(_gate_key(user_id))  # in-process gate: no Redis call


def test_the_process_gate_is_bounded() -> None:
    marks = RecentMarks(ttl_seconds=3600, max_entries=3)
    for user in (1, 2, 3, 1, 4):  # 1 marked again moves to the end; 2 is the oldest
        marks.add(user)
    assert len(marks) == 3
    assert [marks.fresh(u) for u in (1, 2, 3, 4)] == [True, False, True, True]
    assert not RecentMarks(ttl_seconds=0).fresh(1)
    opened = OpenSessions(max_age_seconds=60, max_entries=2)
    for viewer in (1, 2, 3):
        opened.remember(viewer, f"s{viewer}", b"sig")
    assert len(opened) == 2 and opened.matching(1, b"sig") is None
    assert opened.matching(3, b"sig") is not None and opened.matching(3, b"other") is None


# -- session reuse and the count reset -------------------------------------------------------


async def test_a_refresh_with_nothing_new_reuses_the_open_session(client, state, pipeline) -> None:
    viewer, viewer_id, authors, _ = await followed_pair(client, pipeline)
    first = await first_page(client, viewer)
    [key] = await sessions_of(state, viewer_id)
    reused_before = await metric(client, "session", "reused")

    await state.redis.expire(key, 60)  # most of its lifetime gone
    again = await first_page(client, viewer)
    assert again["sessionId"] == first["sessionId"]
    assert ids(again) == ids(first)  # same order...
    assert again["pageInfo"]["endCursor"] == first["pageInfo"]["endCursor"]  # ...same cursors
    assert again["degraded"] is False
    assert await sessions_of(state, viewer_id) == {key}, "a new session key was written"
    assert await state.redis.ttl(key) > 60, "a reused session lives FEED_SESSION_TTL again"
    assert await metric(client, "session", "reused") == reused_before + 1
    # Its cursors scroll on as the first one's did.
    onward = await next_page(client, viewer, again["pageInfo"]["endCursor"])
    assert ids(onward) == ids(await next_page(client, viewer, first["pageInfo"]["endCursor"]))
    assert not set(ids(onward)) & set(ids(first))

    # Something new: a followee posts. The next first page is ranked afresh.
    fresh = await post(client, authors["ann"], "news")
    await pipeline.settle()
    third = await first_page(client, viewer)
    assert third["sessionId"] != first["sessionId"]
    assert fresh in ids(third)
    assert len(await sessions_of(state, viewer_id)) == 2


async def test_what_ends_reuse_own_posts_follows_and_expiry(client, state, pipeline) -> None:
    viewer, viewer_id, _, _ = await followed_pair(client, pipeline)
    cat, _ = await make_user(client, "cat")
    cats = [await post(client, cat, f"cat {i}") for i in range(2)]
    await pipeline.settle()
    seen = {(await first_page(client, viewer))["sessionId"]}

    mine = await post(client, viewer, "my own")  # read-your-writes: a new candidate
    page = await first_page(client, viewer)
    assert page["sessionId"] not in seen and mine in ids(page)
    seen.add(page["sessionId"])

    await follow(client, viewer, "cat")  # pulled at once (recently followed)
    page = await first_page(client, viewer, first=30)
    assert page["sessionId"] not in seen and set(cats) <= set(ids(page))
    seen.add(page["sessionId"])

    await state.redis.delete(_key(viewer_id, page["sessionId"]))  # expired
    page = await first_page(client, viewer, first=30)
    assert page["sessionId"] not in seen  # ranked afresh, not CURSOR_EXPIRED
    seen.add(page["sessionId"])
    assert (await first_page(client, viewer, first=30))["sessionId"] == page["sessionId"]


async def test_a_reused_page_applies_deletes_unfollows_and_blocks(client, state, pipeline) -> None:
    viewer, _, authors, made = await followed_pair(client, pipeline)
    eve, _ = await make_user(client, "eve")
    await follow(client, viewer, "eve")
    await pipeline.settle()
    from_eve = [await post(client, eve, f"eve {i}") for i in range(3)]
    await pipeline.settle()
    first = await first_page(client, viewer, first=30)
    assert set(from_eve) <= set(ids(first))

    # None of these adds a candidate (timelines keep ids until cleanups run: none ran).
    gone = made["ann"][-1]
    (await gql(client, "DeletePost", {"id": str(gone)}, token=authors["ann"])).ok()
    await unfollow(client, viewer, "ben")
    await block(client, eve, "viewer")
    page = await first_page(client, viewer, first=30)
    assert page["sessionId"] == first["sessionId"]
    assert ids(page) == [
        i for i in ids(first) if i != gone and i not in made["ben"] and i not in from_eve
    ]


async def test_the_count_reset_is_skipped_only_when_nothing_arrived(
    client, state, pipeline
) -> None:
    viewer, viewer_id, authors, _ = await followed_pair(client, pipeline)
    first = await first_page(client, viewer)
    mark = await state.redis.get(reset_key(viewer_id))  # ms of the reset after that page
    assert mark is not None
    skipped = await metric(client, "reset", "skipped")
    done = await metric(client, "reset", "done")

    assert (await first_page(client, viewer))["sessionId"] == first["sessionId"]
    assert await state.redis.get(reset_key(viewer_id)) == mark, "the reset ran"
    assert await metric(client, "reset", "skipped") == skipped + 1
    assert await metric(client, "reset", "done") == done

    # A new post: a new ranking, and the reset runs (and moves the mark) again.
    await post(client, authors["ben"], "news")
    await pipeline.settle()
    assert (await first_page(client, viewer))["sessionId"] != first["sessionId"]
    assert int(await state.redis.get(reset_key(viewer_id))) > int(mark)
    assert await metric(client, "reset", "done") == done + 1

    # CHRONOLOGICAL first pages have no session to compare with: they always reset.
    await first_page(client, viewer, mode="CHRONOLOGICAL")
    assert await metric(client, "reset", "done") == done + 2


async def test_a_degraded_ranking_is_not_reused(client, state, pipeline) -> None:
    viewer, _, _, _ = await followed_pair(client, pipeline)
    budget = state.settings.ranking_budget_ms
    object.__setattr__(state.settings, "ranking_budget_ms", -1)
    try:
        degraded = await first_page(client, viewer)
    finally:
        object.__setattr__(state.settings, "ranking_budget_ms", budget)
    assert degraded["degraded"] is True
    ranked = await first_page(client, viewer)
    assert ranked["degraded"] is False and ranked["sessionId"] != degraded["sessionId"]


async def test_a_reused_first_page_costs_fewer_queries(client, state, pipeline) -> None:
    """A fresh RANKED first page: context, the ranking filter over every candidate, the
    shown rows (with their bodies). A reused one skips the ranking filter (and the ranking, and the
    session write)."""
    viewer, _, _, _ = await followed_pair(client, pipeline, posts_each=20)
    await first_page(client, viewer)  # the hourly activity mark is not a page cost
    statements: list[str] = []

    def count(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    costs = []
    event.listen(state.engine.sync_engine, "before_cursor_execute", count)
    try:
        for _ in range(2):
            state.feed.open_sessions.clear()  # a fresh ranking, then a reuse of it
            for _ in range(2):
                statements.clear()
                await first_page(client, viewer, first=20)
                costs.append(len(statements))
    finally:
        event.remove(state.engine.sync_engine, "before_cursor_execute", count)
    fresh, reused = costs[0], costs[1]
    assert costs == [fresh, reused, fresh, reused]
    assert reused == fresh - 1 <= 2, costs
