"""User.followers and User.following through GraphQL: newest edge first, keyset paging
(also while follows arrive), blocks hiding users, typed errors."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.helpers import FORGED_CURSOR, block, connection_page, follow, gql, sign_up, sql, unfollow


async def _page(
    client,
    which: str,
    handle: str,
    token: str | None = None,
    first: int = 20,
    after: str | None = None,
) -> tuple[list[str], dict[str, Any]]:
    operation = "Followers" if which == "followers" else "Following"
    variables = {"handle": handle, "first": first, "after": after}
    nodes, info = await connection_page(client, operation, variables, ("user", which), token)
    return [n["handle"] for n in nodes], info


async def _all(client, which: str, handle: str, token: str | None = None) -> list[str]:
    handles, info = await _page(client, which, handle, token, first=100)
    assert not info["hasNextPage"]
    return handles


async def test_followers_and_following_newest_edge_first(client) -> None:
    star = await sign_up(client, "star")
    fans = {h: await sign_up(client, h) for h in ("fan_a", "fan_b", "fan_c")}
    for token in fans.values():
        await follow(client, token, "star")
    await follow(client, star, "fan_b")
    await follow(client, star, "fan_a")
    assert await _all(client, "followers", "star") == ["fan_c", "fan_b", "fan_a"]
    assert await _all(client, "following", "star") == ["fan_a", "fan_b"]
    assert await _all(client, "following", "fan_a") == ["star"]
    data = (await gql(client, "Followers", {"handle": "star"}, token=fans["fan_a"])).ok()
    assert data["user"]["followerCount"] == 3
    nodes = data["user"]["followers"]["edges"]
    # viewerFollows from the viewer's side, per listed user.
    assert [(e["node"]["handle"], e["node"]["viewerFollows"]) for e in nodes] == [
        ("fan_c", False),
        ("fan_b", False),
        ("fan_a", False),
    ]
    await unfollow(client, fans["fan_b"], "star")
    assert await _all(client, "followers", "star") == ["fan_c", "fan_a"]


async def test_ties_on_the_follow_time_break_on_the_user_id(client) -> None:
    await sign_up(client, "star")
    for i in range(4):
        await follow(client, await sign_up(client, f"fan{i}"), "star")
    await sql("UPDATE follows SET created_at = '2026-01-01T00:00:00Z'")
    handles, info = await _page(client, "followers", "star", first=3)
    rest, last = await _page(client, "followers", "star", first=3, after=info["endCursor"])
    assert handles + rest == ["fan3", "fan2", "fan1", "fan0"]  # user ids descending
    assert info["hasNextPage"] and not last["hasNextPage"] and last["hasPreviousPage"]


async def test_paging_while_follows_arrive_never_repeats_or_skips(client) -> None:
    await sign_up(client, "star")
    first_fans = [f"old{i}" for i in range(7)]
    for handle in first_fans:
        await follow(client, await sign_up(client, handle), "star")
    late = [await sign_up(client, f"new{i}") for i in range(6)]
    seen: list[str] = []
    after = None
    for round_ in range(50):
        # New followers arrive while a page is read: they are newer than any edge served,
        # so they belong before the first page, never inside the rest.
        arriving = late[2 * round_ : 2 * round_ + 2]
        (handles, info), *_ = await asyncio.gather(
            _page(client, "followers", "star", first=2, after=after),
            *(follow(client, token, "star") for token in arriving),
        )
        seen += handles
        after = info["endCursor"] or after
        if not info["hasNextPage"]:
            break
    assert len(seen) == len(set(seen)), "a follower was served twice"
    assert set(first_fans) <= set(seen), "paging skipped a follower"
    every = await _all(client, "followers", "star")
    assert len(every) == 13
    assert seen == [h for h in every if h in seen], "paging broke the order"


async def test_users_across_a_block_are_hidden_from_the_viewer(client) -> None:
    star = await sign_up(client, "star")
    viewer = await sign_up(client, "viewer")
    troll = await sign_up(client, "troll")
    shy = await sign_up(client, "shy")
    nice = await sign_up(client, "nice")
    for token in (troll, shy, nice, viewer):
        await follow(client, token, "star")
    await follow(client, star, "troll")
    await follow(client, star, "nice")
    await block(client, viewer, "troll")  # the viewer blocked one of them
    await block(client, shy, "viewer")  # and one of them blocked the viewer
    assert await _all(client, "followers", "star", viewer) == ["viewer", "nice"]
    assert await _all(client, "following", "star", viewer) == ["nice"]
    # Everyone else, anonymous readers too, sees the whole list.
    everyone = ["viewer", "nice", "shy", "troll"]
    assert await _all(client, "followers", "star", star) == everyone
    assert await _all(client, "followers", "star") == everyone
    assert await _all(client, "following", "star", nice) == ["nice", "troll"]


async def test_bad_arguments_are_typed_errors(client) -> None:
    await sign_up(client, "star")
    for operation in ("Followers", "Following"):
        for first in (0, 101):
            result = await gql(client, operation, {"handle": "star", "first": first})
            assert result.codes == ["BAD_USER_INPUT"], (operation, first)
        for cursor in ("bm9wZQ", FORGED_CURSOR):
            result = await gql(client, operation, {"handle": "star", "after": cursor})
            assert result.codes == ["BAD_USER_INPUT"], cursor
    handles, info = await _page(client, "followers", "star", first=100)
    assert handles == [] and info == {
        "hasNextPage": False,
        "hasPreviousPage": False,
        "startCursor": None,
        "endCursor": None,
    }
    missing = (await gql(client, "Followers", {"handle": "nobody"})).ok()
    assert missing["user"] is None
