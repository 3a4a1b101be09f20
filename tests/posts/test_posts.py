"""Create, edit, delete, idempotency and the visibility matrix, through GraphQL over HTTP."""

from __future__ import annotations

import asyncio

import asyncpg

from tests.helpers import block, create_post, follow, gql, sign_up, sql


async def _outbox_rows() -> list[asyncpg.Record]:
    return await sql("SELECT event_type, payload FROM outbox ORDER BY id")


async def test_create_edit_delete(client) -> None:
    token = await sign_up(client, "alice")
    post = await create_post(client, token, "  first post  ")
    assert post["body"] == "first post"
    assert post["author"]["handle"] == "alice"
    assert len(post["id"]) == 19
    assert post["editedAt"] is None

    edited = (await gql(client, "EditPost", {"id": post["id"], "body": "edited"}, token=token)).ok()
    assert edited["editPost"]["body"] == "edited"
    assert edited["editPost"]["editedAt"] is not None

    fetched = (await gql(client, "Post", {"id": post["id"]}, token=token)).ok()["post"]
    assert fetched["body"] == "edited"

    assert (await gql(client, "DeletePost", {"id": post["id"]}, token=token)).ok()["deletePost"]
    assert (await gql(client, "Post", {"id": post["id"]}, token=token)).ok()["post"] is None
    again = await gql(client, "DeletePost", {"id": post["id"]}, token=token)
    assert again.codes == ["NOT_FOUND"]

    kinds = [row["event_type"] for row in await _outbox_rows()]
    assert kinds == ["PostCreated", "PostEdited", "PostDeleted"]


async def test_only_the_author_can_change_a_post(client) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    post = await create_post(client, alice)
    for op, extra in (
        ("EditPost", {"body": "mine now"}),
        ("SetPostVisibility", {"visibility": "PRIVATE"}),
        ("DeletePost", {}),
    ):
        result = await gql(client, op, {"id": post["id"], **extra}, token=bob)
        assert result.codes == ["FORBIDDEN"], op
    assert (await gql(client, "Post", {"id": post["id"]})).ok()["post"]["body"] == "hello world"


async def test_idempotency_key_returns_the_same_post(client) -> None:
    token = await sign_up(client, "alice")
    first = await create_post(client, token, "once", idempotencyKey="k-1")
    second = await create_post(client, token, "once", idempotencyKey="k-1")
    assert first["id"] == second["id"]
    other = await create_post(client, token, "twice", idempotencyKey="k-2")
    assert other["id"] != first["id"]
    created = [r for r in await _outbox_rows() if r["event_type"] == "PostCreated"]
    assert len(created) == 2


async def test_concurrent_duplicates_make_one_post(client) -> None:
    token = await sign_up(client, "alice")
    results = await asyncio.gather(
        *(
            gql(client, "CreatePost", {"body": "race", "idempotencyKey": "race-1"}, token=token)
            for _ in range(8)
        )
    )
    ids = {r.ok()["createPost"]["id"] for r in results}
    assert len(ids) == 1
    page = (await gql(client, "UserProfile", {"handle": "alice"}, token=token)).ok()
    assert len(page["user"]["posts"]["edges"]) == 1


async def test_same_key_for_two_authors_is_two_posts(client) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    a = await create_post(client, alice, idempotencyKey="shared")
    b = await create_post(client, bob, idempotencyKey="shared")
    assert a["id"] != b["id"]


async def _visible(client, post_id: str, token: str | None) -> bool:
    return (await gql(client, "Post", {"id": post_id}, token=token)).ok()["post"] is not None


async def _listed(client, post_id: str, token: str | None) -> bool:
    data = (await gql(client, "UserProfile", {"handle": "author"}, token=token)).ok()
    return any(e["node"]["id"] == post_id for e in data["user"]["posts"]["edges"])


async def test_visibility_matrix(client) -> None:
    author = await sign_up(client, "author")
    follower = await sign_up(client, "follower")
    stranger = await sign_up(client, "stranger")
    blocked = await sign_up(client, "blocked")
    await follow(client, follower, "author")
    await follow(client, blocked, "author")
    await block(client, author, "blocked")

    posts = {
        v: (await create_post(client, author, f"{v} post", visibility=v))["id"]
        for v in ("PUBLIC", "FOLLOWERS", "PRIVATE")
    }
    expected = {
        "author": {"PUBLIC": True, "FOLLOWERS": True, "PRIVATE": True},
        "follower": {"PUBLIC": True, "FOLLOWERS": True, "PRIVATE": False},
        "stranger": {"PUBLIC": True, "FOLLOWERS": False, "PRIVATE": False},
        "blocked": {"PUBLIC": False, "FOLLOWERS": False, "PRIVATE": False},
        "anonymous": {"PUBLIC": True, "FOLLOWERS": False, "PRIVATE": False},
    }
    tokens = {
        "author": author,
        "follower": follower,
        "stranger": stranger,
        "blocked": blocked,
        "anonymous": None,
    }
    for who, row in expected.items():
        for visibility, allowed in row.items():
            post_id = posts[visibility]
            assert await _visible(client, post_id, tokens[who]) is allowed, (who, visibility)
            assert await _listed(client, post_id, tokens[who]) is allowed, (who, visibility)

    # A hidden post answers exactly like a missing one.
    hidden = await gql(client, "LikePost", {"id": posts["PRIVATE"]}, token=stranger)
    missing = await gql(client, "LikePost", {"id": "1" * 19}, token=stranger)
    assert hidden.codes == missing.codes == ["NOT_FOUND"]
    assert hidden.errors[0]["message"] == missing.errors[0]["message"]

    # Changing visibility applies at once.
    (
        await gql(
            client,
            "SetPostVisibility",
            {"id": posts["PRIVATE"], "visibility": "PUBLIC"},
            token=author,
        )
    ).ok()
    assert await _visible(client, posts["PRIVATE"], stranger)


async def test_user_posts_keyset_paging(client) -> None:
    token = await sign_up(client, "author")
    made = [(await create_post(client, token, f"post {i}"))["id"] for i in range(7)]
    seen: list[str] = []
    after = None
    while True:
        data = (
            await gql(client, "UserProfile", {"handle": "author", "first": 3, "after": after})
        ).ok()
        conn = data["user"]["posts"]
        seen += [e["node"]["id"] for e in conn["edges"]]
        if not conn["pageInfo"]["hasNextPage"]:
            break
        after = conn["pageInfo"]["endCursor"]
    assert seen == list(reversed(made))


async def test_likes_and_comments_counts(client) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    post = await create_post(client, alice)
    liked = (await gql(client, "LikePost", {"id": post["id"]}, token=bob)).ok()["likePost"]
    assert liked["likeCount"] == 1 and liked["viewerHasLiked"]
    twice = (await gql(client, "LikePost", {"id": post["id"]}, token=bob)).ok()["likePost"]
    assert twice["likeCount"] == 1
    comment = (
        await gql(client, "AddComment", {"postId": post["id"], "body": "nice"}, token=bob)
    ).ok()["addComment"]
    assert comment["author"]["handle"] == "bob"
    after = (await gql(client, "Post", {"id": post["id"]}, token=bob)).ok()["post"]
    assert after["commentCount"] == 1 and after["likeCount"] == 1
    unliked = (await gql(client, "UnlikePost", {"id": post["id"]}, token=bob)).ok()["unlikePost"]
    assert unliked["likeCount"] == 0 and not unliked["viewerHasLiked"]
