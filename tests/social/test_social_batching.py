"""Post.comments and User.followers/following are batched (issue 19): the pages of every
parent in a response take one query per distinct page size, so a response of 6 parents sends
as many SQL statements as one of 2."""

from __future__ import annotations

import httpx

from app.state import AppState
from tests.helpers import add_comment, counting_statements, follow, gql, post, sign_up

POSTS_WITH_COMMENTS = """query($n: Int!) { user(handle: "author") { posts(first: $n) {
    edges { node { id comments(first: 2) { edges { node { body author { handle } } } }
    more: comments(first: 5) { edges { node { id } } } } } } } }"""

FOLLOWERS_WITH_LISTS = """query($n: Int!) { user(handle: "star") { followers(first: $n) {
    edges { node { handle followers(first: 3) { edges { node { handle } } }
    following(first: 3) { edges { node { handle } } } } } } } }"""


async def _statements(
    client: httpx.AsyncClient, state: AppState, query: str, n: int, token: str
) -> tuple[int, dict]:
    with counting_statements(state) as seen:
        data = (await gql(client, "", {"n": n}, token=token, query=query)).ok()
    return len(seen), data


async def test_comments_of_many_posts_take_one_query_per_page_size(
    client: httpx.AsyncClient, state: AppState
) -> None:
    author = await sign_up(client, "author")
    readers = [await sign_up(client, f"reader{i}") for i in range(2)]
    for i in range(6):
        pid = await post(client, author, f"post {i}")
        for j, reader in enumerate(readers):
            await add_comment(client, reader, pid, f"comment {i}.{j}")
    viewer = await sign_up(client, "viewer")
    await _statements(client, state, POSTS_WITH_COMMENTS, 1, viewer)  # first read: warm-up
    counts = []
    for n in (2, 6):
        seen, data = await _statements(client, state, POSTS_WITH_COMMENTS, n, viewer)
        edges = data["user"]["posts"]["edges"]
        assert len(edges) == n
        for edge in edges:
            i = edge["node"]["comments"]["edges"][0]["node"]["body"].split()[1].split(".")[0]
            bodies = [c["node"]["body"] for c in edge["node"]["comments"]["edges"]]
            assert bodies == [f"comment {i}.0", f"comment {i}.1"]
            assert len(edge["node"]["more"]["edges"]) == 2
        counts.append(seen)
    assert counts[0] == counts[1], counts


async def test_follow_lists_of_many_users_take_one_query_per_page_size(
    client: httpx.AsyncClient, state: AppState
) -> None:
    star = await sign_up(client, "star")
    fans = [await sign_up(client, f"fan{i}") for i in range(6)]
    for i, fan in enumerate(fans):
        await follow(client, fan, "star")
        await follow(client, star, f"fan{i}")
        await follow(client, fan, f"fan{(i + 1) % 6}")
    viewer = await sign_up(client, "viewer")
    await _statements(client, state, FOLLOWERS_WITH_LISTS, 1, viewer)  # first read: warm-up
    counts = []
    for n in (2, 6):
        seen, data = await _statements(client, state, FOLLOWERS_WITH_LISTS, n, viewer)
        nodes = [e["node"] for e in data["user"]["followers"]["edges"]]
        assert len(nodes) == n
        for node in nodes:
            i = int(node["handle"][3:])
            followers = {u["node"]["handle"] for u in node["followers"]["edges"]}
            assert followers == {"star", f"fan{(i - 1) % 6}"}
            following = {u["node"]["handle"] for u in node["following"]["edges"]}
            assert following == {"star", f"fan{(i + 1) % 6}"}
        counts.append(seen)
    assert counts[0] == counts[1], counts


async def test_batched_pages_keep_cursors_and_blocks(client: httpx.AsyncClient) -> None:
    """A nested page with `after` and a viewer's blocks read as the single pages did."""
    author = await sign_up(client, "author")
    troll = await sign_up(client, "troll")
    viewer = await sign_up(client, "viewer")
    pid = await post(client, author, "post")
    for i in range(3):
        await add_comment(client, viewer, pid, f"mine {i}")
        await add_comment(client, troll, pid, f"troll {i}")
    await follow(client, troll, "viewer")
    await gql(client, "Block", {"handle": "troll"}, token=viewer)
    query = """query($after: String) { user(handle: "author") { posts(first: 5) { edges {
        node { comments(first: 1, after: $after) { edges { cursor node { body } }
        pageInfo { hasNextPage } } } } } } }"""
    bodies, after = [], None
    while True:
        data = (await gql(client, "", {"after": after}, token=viewer, query=query)).ok()
        page = data["user"]["posts"]["edges"][0]["node"]["comments"]
        bodies += [e["node"]["body"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["edges"][-1]["cursor"]
    assert bodies == ["mine 0", "mine 1", "mine 2"]
