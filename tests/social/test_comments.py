"""Post.comments and deleteComment through GraphQL: order, paging, visibility, blocks, who
may delete, and the denormalised posts.comment_count."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.helpers import (
    FORGED_CURSOR,
    add_comment,
    block,
    connection_page,
    follow,
    gql,
    make_user,
    post,
    sign_up,
    sql,
)

COMMENTS = ("post", "comments")


async def _page(
    client, post_id: int, token: str | None = None, first: int = 20, after: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    variables = {"id": str(post_id), "first": first, "after": after}
    return await connection_page(client, "PostComments", variables, COMMENTS, token=token)


async def _bodies(client, post_id: int, token: str | None = None) -> list[str]:
    nodes, info = await _page(client, post_id, token, first=100)
    assert not info["hasNextPage"]
    return [n["body"] for n in nodes]


async def _comment_count(client, post_id: int, token: str | None = None) -> int:
    data = (await gql(client, "PostComments", {"id": str(post_id)}, token=token)).ok()
    return int(data["post"]["commentCount"])


async def _stored_count(post_id: int) -> tuple[int, int]:
    """(posts.comment_count, the comments rows) of a post."""
    (row,) = await sql(
        "SELECT comment_count, (SELECT count(*) FROM comments WHERE post_id = $1) AS n"
        " FROM posts WHERE id = $1",
        post_id,
    )
    return row["comment_count"], row["n"]


async def test_comments_oldest_first_keyset_paged(client) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    pid = await post(client, alice, "a post")
    for i in range(5):
        await add_comment(client, bob if i % 2 else alice, pid, f"c{i}")
    nodes, info = await _page(client, pid, first=2)
    assert [n["body"] for n in nodes] == ["c0", "c1"]
    assert nodes[1]["author"]["handle"] == "bob"
    assert info["hasNextPage"] and not info["hasPreviousPage"]
    seen = [n["body"] for n in nodes]
    while info["hasNextPage"]:
        nodes, info = await _page(client, pid, first=2, after=info["endCursor"])
        assert info["hasPreviousPage"]
        seen += [n["body"] for n in nodes]
    assert seen == ["c0", "c1", "c2", "c3", "c4"]
    assert await _comment_count(client, pid) == 5


async def test_paging_while_comments_arrive_never_repeats_or_skips(client) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    carol = await sign_up(client, "carol")
    pid = await post(client, alice, "busy post")
    for i in range(4):
        await add_comment(client, bob, pid, f"early{i}")
    seen: list[str] = []
    after = None
    for round_ in range(50):
        # New comments arrive while a page is read (and between pages), two at once.
        arriving = round_ < 4
        writers = (alice, carol) if arriving else ()
        (nodes, info), *_ = await asyncio.gather(
            _page(client, pid, bob, first=2, after=after),
            *(add_comment(client, who, pid, f"late{round_}") for who in writers),
        )
        seen += [n["id"] for n in nodes]
        after = info["endCursor"] or after
        if not info["hasNextPage"] and not arriving:
            break
    assert len(seen) == len(set(seen)), "a comment was served twice"
    every, _ = await _page(client, pid, bob, first=100)
    assert seen == [n["id"] for n in every], "paging skipped a comment or reordered"
    assert len(seen) == 4 + 8


async def test_comments_visible_exactly_when_the_post_is(client) -> None:
    alice = await sign_up(client, "alice")
    fan = await sign_up(client, "fan")
    stranger = await sign_up(client, "stranger")
    await follow(client, fan, "alice")
    pid = await post(client, alice, "for followers", visibility="FOLLOWERS")
    await add_comment(client, fan, pid, "nice")
    assert await _bodies(client, pid, fan) == ["nice"]
    assert await _bodies(client, pid, alice) == ["nice"]
    for token in (stranger, None):  # the post is hidden, so are its comments
        data = (await gql(client, "PostComments", {"id": str(pid)}, token=token)).ok()
        assert data["post"] is None
    # A stranger cannot comment there either.
    result = await gql(client, "AddComment", {"postId": str(pid), "body": "hi"}, token=stranger)
    assert result.codes == ["NOT_FOUND"]
    private = {"id": str(pid), "visibility": "PRIVATE"}
    (await gql(client, "SetPostVisibility", private, token=alice)).ok()
    data = (await gql(client, "PostComments", {"id": str(pid)}, token=fan)).ok()
    assert data["post"] is None
    public = await post(client, alice, "for all")
    await add_comment(client, fan, public, "open")
    assert await _bodies(client, public) == ["open"]  # anonymous readers too
    (await gql(client, "DeletePost", {"id": str(public)}, token=alice)).ok()
    assert (await gql(client, "PostComments", {"id": str(public)}, token=fan)).ok()["post"] is None


async def test_comments_across_a_block_are_left_out_both_ways(client) -> None:
    alice = await sign_up(client, "alice")
    troll = await sign_up(client, "troll")
    viewer = await sign_up(client, "viewer")
    shy = await sign_up(client, "shy")
    pid = await post(client, alice, "hello")
    await add_comment(client, troll, pid, "from troll")
    await add_comment(client, viewer, pid, "from viewer")
    await add_comment(client, shy, pid, "from shy")
    await block(client, viewer, "troll")  # the viewer blocks the commenter
    await block(client, shy, "viewer")  # a commenter blocks the viewer
    assert await _bodies(client, pid, viewer) == ["from viewer"]
    assert await _bodies(client, pid, troll) == ["from troll", "from shy"]
    assert await _bodies(client, pid, shy) == ["from troll", "from shy"]
    assert await _bodies(client, pid, alice) == ["from troll", "from viewer", "from shy"]
    assert await _bodies(client, pid) == ["from troll", "from viewer", "from shy"]
    # Paging over the hidden ones still works: the cursor is a position.
    nodes, info = await _page(client, pid, troll, first=1)
    assert [n["body"] for n in nodes] == ["from troll"] and info["hasNextPage"]
    nodes, info = await _page(client, pid, troll, first=1, after=info["endCursor"])
    assert [n["body"] for n in nodes] == ["from shy"] and not info["hasNextPage"]


async def test_delete_comment_by_its_author_or_the_posts_author(client) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    carol = await sign_up(client, "carol")
    pid = await post(client, alice, "post")
    by_bob = await add_comment(client, bob, pid, "bob's")
    by_carol = await add_comment(client, carol, pid, "carol's")
    also_bob = await add_comment(client, bob, pid, "bob again")
    assert await _stored_count(pid) == (3, 3)

    refused = await gql(client, "DeleteComment", {"id": by_bob}, token=carol)
    assert refused.codes == ["FORBIDDEN"]
    assert (await gql(client, "DeleteComment", {"id": by_bob}, token=bob)).ok() == {
        "deleteComment": True
    }
    (await gql(client, "DeleteComment", {"id": by_carol}, token=alice)).ok()  # post's author
    assert await _bodies(client, pid) == ["bob again"]
    assert await _comment_count(client, pid) == 1
    assert await _stored_count(pid) == (1, 1)

    again = await gql(client, "DeleteComment", {"id": by_bob}, token=bob)
    assert again.codes == ["NOT_FOUND"]
    for unknown in ("999999", "abc", "-1", "1" * 30, ""):
        result = await gql(client, "DeleteComment", {"id": unknown}, token=bob)
        assert result.codes == ["NOT_FOUND"], unknown
    anonymous = await gql(client, "DeleteComment", {"id": also_bob})
    assert anonymous.codes == ["UNAUTHENTICATED"]
    assert await _stored_count(pid) == (1, 1)


async def test_a_commenter_deletes_their_comment_on_a_post_hidden_from_them(client) -> None:
    """Moderation is not reading (decision 0018): losing sight of the post (here an unfollow
    of a FOLLOWERS post; a block: tests/social/test_blocks_hold.py) leaves the comment theirs."""
    alice = await sign_up(client, "alice")
    fan = await sign_up(client, "fan")
    stranger = await sign_up(client, "stranger")
    await follow(client, fan, "alice")
    pid = await post(client, alice, "followers only", visibility="FOLLOWERS")
    comment = await add_comment(client, fan, pid, "mine")
    (await gql(client, "Unfollow", {"handle": "alice"}, token=fan)).ok()
    assert (await gql(client, "PostComments", {"id": str(pid)}, token=fan)).ok()["post"] is None
    # Someone who cannot see it: NOT_FOUND, as for an unknown comment.
    result = await gql(client, "DeleteComment", {"id": comment}, token=stranger)
    assert result.codes == ["NOT_FOUND"]
    (await gql(client, "DeleteComment", {"id": comment}, token=fan)).ok()
    assert await _stored_count(pid) == (0, 0)


async def test_comment_count_stays_consistent_under_concurrent_adds_and_deletes(client) -> None:
    alice = await sign_up(client, "alice")
    users = [await sign_up(client, f"user{i}") for i in range(4)]
    pid = await post(client, alice, "popular")
    first_ids = [await add_comment(client, u, pid, "first") for u in users]
    deletes = [
        gql(client, "DeleteComment", {"id": cid}, token=token)
        for cid, token in zip(first_ids, users, strict=True)
    ]
    # Each comment deleted twice at once (one succeeds), while new ones arrive.
    doubles = [gql(client, "DeleteComment", {"id": cid}, token=alice) for cid in first_ids]
    adds = [add_comment(client, u, pid, f"more {i}") for i, u in enumerate(users * 2)]
    results = await asyncio.gather(*deletes, *doubles, *adds)
    outcomes = [r.codes for r in results[: 2 * len(first_ids)]]
    assert outcomes.count([]) == len(first_ids), outcomes
    assert await _stored_count(pid) == (8, 8)
    assert await _comment_count(client, pid) == 8


async def test_bad_page_arguments_are_typed_errors(client) -> None:
    alice, _ = await make_user(client, "alice")
    pid = await post(client, alice, "post")
    for first in (0, 101, -1):
        result = await gql(client, "PostComments", {"id": str(pid), "first": first})
        assert result.codes == ["BAD_USER_INPUT"], first
    for cursor in ("not-a-cursor", FORGED_CURSOR):
        result = await gql(client, "PostComments", {"id": str(pid), "after": cursor})
        assert result.codes == ["BAD_USER_INPUT"], cursor
    nodes, info = await _page(client, pid, first=100)
    assert nodes == [] and not info["hasNextPage"] and info["endCursor"] is None


async def _add(client, token: str, post_id: int, body: str, key: str | None) -> Any:
    variables = {"postId": str(post_id), "body": body, "idempotencyKey": key}
    return await gql(client, "AddComment", variables, token=token)


async def test_a_retried_comment_with_its_idempotency_key_is_added_once(client) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    pid = await post(client, alice, "post")
    first = (await _add(client, bob, pid, "once", "key-1")).ok()["addComment"]
    # A retry after a lost answer, and concurrent duplicates: the first comment each time.
    retries = await asyncio.gather(*(_add(client, bob, pid, "once", "key-1") for _ in range(4)))
    assert {r.ok()["addComment"]["id"] for r in retries} == {first["id"]}
    raced = await asyncio.gather(*(_add(client, bob, pid, "raced", "key-2") for _ in range(4)))
    assert len({r.ok()["addComment"]["id"] for r in raced}) == 1
    assert await _stored_count(pid) == (2, 2)
    assert await _comment_count(client, pid) == 2
    # The key is the user's: another user's same key, or no key, adds a comment.
    (await _add(client, alice, pid, "alice's", "key-1")).ok()
    (await _add(client, bob, pid, "no key", None)).ok()
    assert await _stored_count(pid) == (4, 4)


async def test_comment_idempotency_key_refusals(client) -> None:
    alice = await sign_up(client, "alice")
    pid = await post(client, alice, "post")
    other = await post(client, alice, "another post")
    for bad in ("", "k" * 101):
        assert (await _add(client, alice, pid, "c", bad)).codes == ["BAD_USER_INPUT"], bad
    made = (await _add(client, alice, pid, "c", "k" * 100)).ok()["addComment"]
    # A key names one comment: reused on another post it is refused, not a second comment.
    assert (await _add(client, alice, other, "c", "k" * 100)).codes == ["BAD_USER_INPUT"]
    (await gql(client, "DeleteComment", {"id": made["id"]}, token=alice)).ok()
    # Its comment deleted, the key answers NOT_FOUND (as createPost's does), never a new one.
    assert (await _add(client, alice, pid, "c", "k" * 100)).codes == ["NOT_FOUND"]
    assert await _stored_count(pid) == (0, 0)
