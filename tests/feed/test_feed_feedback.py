"""Negative feedback in home feeds (decision 0076): a hidden post and a muted author's posts
never appear in the viewer's feed, RANKED or CHRONOLOGICAL, also on the next pages of a
session opened before the hide or mute (session pages re-run the home-feed rule); the
author's profile still shows them; unhide and unmute bring them back.

conftest shrinks capacities: FEED_SESSION_SIZE 120, pull at 10 followers.
"""

from __future__ import annotations

import pytest

from app.posts.ids import encode_post_id
from tests.helpers import author_with_fans, feed_ids, follow, full_scroll, gql, make_user, post


async def _page(client, token, mode, first, after=None) -> dict:
    variables = {"first": first, "after": after, "mode": mode}
    return (await gql(client, "Feed", variables, token=token)).ok()["feed"]


def _ids(page: dict) -> list[int]:
    return [int(e["node"]["id"]) for e in page["edges"]]


async def _hide(client, token, post_id: int, op: str = "HidePost") -> None:
    (await gql(client, op, {"id": encode_post_id(post_id)}, token=token)).ok()


async def _mute(client, token, handle: str, op: str = "MuteAuthor") -> None:
    (await gql(client, op, {"handle": handle}, token=token)).ok()


async def _three_authors(client, pipeline, each: int = 12):
    viewer, _ = await make_user(client, "viewer")
    tokens = {h: (await make_user(client, h))[0] for h in ("ann", "ben", "cat")}
    for handle in tokens:
        await follow(client, viewer, handle)
    await pipeline.settle()
    made: dict[str, list[int]] = {h: [] for h in tokens}
    for i in range(each):
        for handle, token in tokens.items():
            made[handle].append(await post(client, token, f"{handle} {i}"))
    await pipeline.settle()
    return viewer, tokens, made


@pytest.mark.parametrize("mode", ["RANKED", "CHRONOLOGICAL"])
async def test_hidden_and_muted_leave_the_feed_and_come_back(client, pipeline, mode) -> None:
    viewer, _, made = await _three_authors(client, pipeline, each=4)
    hidden = made["ann"][1]
    await _hide(client, viewer, hidden)
    await _mute(client, viewer, "ben")
    shown = await feed_ids(client, viewer, mode=mode)
    assert set(shown) == (set(made["ann"]) - {hidden}) | set(made["cat"])
    # The profile still shows both.
    query = "query($h: String!) { user(handle: $h) { posts { edges { node { id } } } } }"
    for handle, expected in (("ann", made["ann"]), ("ben", made["ben"])):
        user = (await gql(client, "", {"h": handle}, token=viewer, query=query)).ok()["user"]
        assert set(_ids(user["posts"])) == set(expected)
    await _hide(client, viewer, hidden, "UnhidePost")
    await _mute(client, viewer, "ben", "UnmuteAuthor")
    assert set(await feed_ids(client, viewer, mode=mode)) == {p for ps in made.values() for p in ps}


@pytest.mark.parametrize("mode", ["RANKED", "CHRONOLOGICAL"])
async def test_an_open_session_drops_what_is_hidden_or_muted_on_its_next_pages(
    client, pipeline, mode
) -> None:
    viewer, _, made = await _three_authors(client, pipeline)
    first = await _page(client, viewer, mode, 6)
    seen = _ids(first)
    if mode == "RANKED":
        assert first["sessionId"]
    # A post of a later page hidden, an author muted, while the session is open.
    later = [p for p in made["ann"] if p not in seen]
    hidden = later[len(later) // 2]
    await _hide(client, viewer, hidden)
    await _mute(client, viewer, "ben")
    cut = len(seen)
    after = first["pageInfo"]["endCursor"]
    while after is not None:
        page = await _page(client, viewer, mode, 6, after)
        seen += _ids(page)
        after = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
    assert hidden not in seen
    assert not set(made["ben"]) & set(seen[cut:]), "a muted author's post after the mute"
    assert len(seen) == len(set(seen))
    # Nothing else skipped.
    assert set(made["ann"]) - {hidden} <= set(seen) and set(made["cat"]) <= set(seen)


async def test_show_fewer_hides_the_post_and_a_pull_mode_author_is_muted_too(
    client, state, pipeline
) -> None:
    """A pull-mode author (conftest: pull at 10 followers) reaches feeds through the pulled
    source, filtered by the same rule."""
    star, _, fans = await author_with_fans(client, 11, author="star")
    viewer = fans[0][0]
    await pipeline.settle()
    posts = [await post(client, star, f"star {i}") for i in range(3)]
    await pipeline.settle()
    assert set(await feed_ids(client, viewer)) == set(posts)
    variables = {"postId": encode_post_id(posts[0])}
    (await gql(client, "ShowFewerLikeThis", variables, token=viewer)).ok()
    for mode in ("RANKED", "CHRONOLOGICAL"):
        assert set(await feed_ids(client, viewer, mode=mode)) == set(posts[1:])
    await _mute(client, viewer, "star")
    for mode in ("RANKED", "CHRONOLOGICAL"):
        assert await full_scroll(client, viewer, mode=mode) == []
    # Another fan's feed is unchanged.
    assert set(await feed_ids(client, fans[1][0])) == set(posts)
