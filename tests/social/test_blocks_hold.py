"""Blocks hold everywhere (issue 19, decision 0018): across a block neither user sees the
other's graph (lists and counts), and moderation of one's own posts and comments, and taking
back a like, still work once the block hides the post or the comment."""

from __future__ import annotations

from typing import Any

from tests.helpers import add_comment, block, follow, gql, post, sign_up, sql


async def _graph(client: Any, handle: str, token: str | None) -> dict[str, Any]:
    """followerCount, followingCount and both lists' handles of `handle` as `token` sees them."""
    seen: dict[str, Any] = {}
    for operation, which, count in (
        ("Followers", "followers", "followerCount"),
        ("Following", "following", "followingCount"),
    ):
        variables = {"handle": handle, "first": 100}
        user = (await gql(client, operation, variables, token=token)).ok()["user"]
        seen[count] = user[count]
        seen[which] = [e["node"]["handle"] for e in user[which]["edges"]]
    profile = (await gql(client, "UserProfile", {"handle": handle}, token=token)).ok()["user"]
    assert profile["followerCount"] == seen["followerCount"]
    assert profile["followingCount"] == seen["followingCount"]
    return seen


async def test_neither_side_of_a_block_sees_the_others_graph(client) -> None:
    blocker = await sign_up(client, "blocker")
    blocked = await sign_up(client, "blocked")
    fan = await sign_up(client, "fan")
    idol = await sign_up(client, "idol")
    await follow(client, fan, "blocker")
    await follow(client, blocker, "idol")
    await follow(client, fan, "blocked")
    await follow(client, blocked, "idol")
    full_blocker = {
        "followerCount": 1,
        "followers": ["fan"],
        "followingCount": 1,
        "following": ["idol"],
    }
    assert await _graph(client, "blocker", blocked) == full_blocker
    await block(client, blocker, "blocked")
    hidden = {"followerCount": 0, "followers": [], "followingCount": 0, "following": []}
    assert await _graph(client, "blocker", blocked) == hidden  # the blocked viewer
    assert await _graph(client, "blocked", blocker) == hidden  # and the blocker (both ways)
    # The profile itself still answers (the blocker can find whom to unblock).
    profile = (await gql(client, "UserProfile", {"handle": "blocker"}, token=blocked)).ok()
    assert profile["user"]["handle"] == "blocker" and profile["user"]["posts"]["edges"] == []
    # Everyone else sees both graphs whole, and never one side in the other's lists.
    for token in (fan, idol, None):
        assert await _graph(client, "blocker", token) == full_blocker
    assert (await _graph(client, "idol", blocker))["followers"] == ["blocker"]
    assert (await _graph(client, "fan", blocked))["following"] == ["blocked"]
    assert (await _graph(client, "fan", blocker))["following"] == ["blocker"]
    # The mutation's own answer shows the blocked user's graph hidden too.
    again = (await gql(client, "Block", {"handle": "blocked"}, token=blocker)).ok()["block"]
    assert (again["followerCount"], again["followingCount"]) == (0, 0)
    (await gql(client, "Unblock", {"handle": "blocked"}, token=blocker)).ok()
    assert await _graph(client, "blocker", blocked) == full_blocker


async def _comment_rows(post_id: int) -> tuple[int, list[str]]:
    (row,) = await sql("SELECT comment_count FROM posts WHERE id = $1", post_id)
    bodies = await sql("SELECT body FROM comments WHERE post_id = $1 ORDER BY id", post_id)
    return row["comment_count"], [b["body"] for b in bodies]


async def test_comments_can_be_moderated_across_a_block(client) -> None:
    author = await sign_up(client, "author")
    troll = await sign_up(client, "troll")
    victim = await sign_up(client, "victim")
    other = await sign_up(client, "other")
    pid = await post(client, author, "my post")
    by_troll = await add_comment(client, troll, pid, "troll 1")
    also_troll = await add_comment(client, troll, pid, "troll 2")
    by_victim = await add_comment(client, victim, pid, "victim 1")
    by_other = await add_comment(client, other, pid, "other 1")
    await block(client, author, "troll")  # the post's author blocks a commenter
    await block(client, victim, "author")  # a commenter blocks the post's author
    # The post's author deletes the comments of both.
    (await gql(client, "DeleteComment", {"id": by_troll}, token=author)).ok()
    (await gql(client, "DeleteComment", {"id": by_victim}, token=author)).ok()
    # A commenter deletes their own comment on a post hidden from them now.
    (await gql(client, "DeleteComment", {"id": also_troll}, token=troll)).ok()
    assert await _comment_rows(pid) == (1, ["other 1"])
    # Anyone else still may not; a comment they cannot see stays NOT_FOUND.
    assert (await gql(client, "DeleteComment", {"id": by_other}, token=troll)).codes == [
        "NOT_FOUND"
    ]
    bystander = await sign_up(client, "bystander")
    assert (await gql(client, "DeleteComment", {"id": by_other}, token=bystander)).codes == [
        "FORBIDDEN"
    ]
    assert await _comment_rows(pid) == (1, ["other 1"])


async def test_a_like_can_be_taken_back_from_a_post_hidden_from_the_liker(client) -> None:
    author = await sign_up(client, "author")
    fan = await sign_up(client, "fan")
    pid = await post(client, author, "likeable")
    (await gql(client, "LikePost", {"id": str(pid)}, token=fan)).ok()
    await block(client, author, "fan")
    gone = await gql(client, "UnlikePost", {"id": str(pid)}, token=fan)
    # The like is gone; the post itself stays hidden from the former liker.
    assert gone.codes == ["NOT_FOUND"] and gone.data is None
    seen = (await gql(client, "Post", {"id": str(pid)}, token=author)).ok()["post"]
    assert seen["likeCount"] == 0
    assert await sql("SELECT 1 FROM likes WHERE post_id = $1", pid) == []
    # Again: no like to take back, the same answer; liking a hidden post is still refused.
    again = await gql(client, "UnlikePost", {"id": str(pid)}, token=fan)
    assert again.codes == ["NOT_FOUND"]
    assert (await gql(client, "LikePost", {"id": str(pid)}, token=fan)).codes == ["NOT_FOUND"]
    (row,) = await sql("SELECT like_count FROM posts WHERE id = $1", pid)
    assert row["like_count"] == 0
