"""Follow, unfollow and block: edges and the counters that move with them."""

from __future__ import annotations

import asyncio

from tests.helpers import gql, sign_up


async def _counts(client, handle: str, token: str | None = None) -> tuple[int, int, bool]:
    user = (await gql(client, "UserProfile", {"handle": handle}, token=token)).ok()["user"]
    return user["followerCount"], user["followingCount"], user["viewerFollows"]


async def test_follow_unfollow_counts(client) -> None:
    alice = await sign_up(client, "alice")
    await sign_up(client, "bob")
    followed = (await gql(client, "Follow", {"handle": "bob"}, token=alice)).ok()["follow"]
    assert followed["followerCount"] == 1 and followed["viewerFollows"]
    # Following twice is a no-op, not a second edge.
    (await gql(client, "Follow", {"handle": "bob"}, token=alice)).ok()
    assert await _counts(client, "bob", alice) == (1, 0, True)
    assert await _counts(client, "alice", alice) == (0, 1, False)
    (await gql(client, "Unfollow", {"handle": "bob"}, token=alice)).ok()
    assert await _counts(client, "bob", alice) == (0, 0, False)
    assert await _counts(client, "alice") == (0, 0, False)


async def test_block_cuts_follows_both_ways_and_prevents_following(client) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    (await gql(client, "Follow", {"handle": "bob"}, token=alice)).ok()
    (await gql(client, "Follow", {"handle": "alice"}, token=bob)).ok()
    (await gql(client, "Block", {"handle": "bob"}, token=alice)).ok()
    assert await _counts(client, "alice") == (0, 0, False)
    assert await _counts(client, "bob") == (0, 0, False)
    for token, handle in ((alice, "bob"), (bob, "alice")):
        result = await gql(client, "Follow", {"handle": handle}, token=token)
        assert result.codes == ["FORBIDDEN"]
    (await gql(client, "Unblock", {"handle": "bob"}, token=alice)).ok()
    (await gql(client, "Follow", {"handle": "alice"}, token=bob)).ok()
    assert await _counts(client, "alice") == (1, 0, False)


async def test_concurrent_follows_keep_counts_exact(client) -> None:
    await sign_up(client, "star")
    tokens = [await sign_up(client, f"fan{i}") for i in range(6)]
    await asyncio.gather(
        *(gql(client, "Follow", {"handle": "star"}, token=t) for t in tokens for _ in range(2))
    )
    assert (await _counts(client, "star"))[0] == 6
    await asyncio.gather(*(gql(client, "Unfollow", {"handle": "star"}, token=t) for t in tokens))
    assert (await _counts(client, "star"))[0] == 0


async def test_self_and_missing_targets(client) -> None:
    alice = await sign_up(client, "alice")
    assert (await gql(client, "Follow", {"handle": "alice"}, token=alice)).codes == [
        "BAD_USER_INPUT"
    ]
    assert (await gql(client, "Follow", {"handle": "ghost"}, token=alice)).codes == ["NOT_FOUND"]
    assert (await gql(client, "UserProfile", {"handle": "ghost"})).ok() == {"user": None}
