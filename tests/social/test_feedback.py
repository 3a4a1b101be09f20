"""Negative feedback through the public API: hidePost, unhidePost, showFewerLikeThis,
muteAuthor, unmuteAuthor, User.viewerMutes and the viewer's mutedUsers (decision 0076).

Feeds and counts are tested apart (tests/feed/test_feed_feedback.py,
tests/realtime/test_counts_feedback.py); here: each mutation's answer, its idempotency, its
errors, that a mute is no block, that a profile and a post by id still show what was hidden
or muted, and that nobody reads another user's mutes.
"""

from __future__ import annotations

from app.posts.ids import encode_post_id
from tests.helpers import app_client, follow, gql, make_user, post, sign_up, sql


async def _hide(client, token: str | None, post_id: int, op: str = "HidePost"):
    return await gql(client, op, {"id": encode_post_id(post_id)}, token=token)


async def _profile(client, handle: str, token: str) -> dict:
    query = "query($h: String!) { user(handle: $h) { viewerMutes followerCount viewerFollows"
    query += " posts { edges { node { id } } } } }"
    return (await gql(client, "", {"h": handle}, token=token, query=query)).ok()["user"]


async def test_hide_and_unhide_post(client) -> None:
    viewer = await sign_up(client, "viewer")
    author = await sign_up(client, "author")
    post_id = await post(client, author, "hello")
    assert (await _hide(client, viewer, post_id)).ok() == {"hidePost": True}
    assert (await _hide(client, viewer, post_id)).ok() == {"hidePost": True}  # idempotent
    rows = await sql("SELECT user_id, post_id FROM hidden_posts")
    assert [r["post_id"] for r in rows] == [post_id]
    # Still there by id and on the author's profile: a hide narrows feeds only.
    query = "query($id: ID!) { post(id: $id) { id } }"
    found = await gql(client, "", {"id": encode_post_id(post_id)}, token=viewer, query=query)
    assert found.ok()["post"] is not None
    profile = await _profile(client, "author", viewer)
    assert [int(e["node"]["id"]) for e in profile["posts"]["edges"]] == [post_id]
    assert (await _hide(client, viewer, post_id, "UnhidePost")).ok() == {"unhidePost": True}
    assert (await _hide(client, viewer, post_id, "UnhidePost")).ok() == {"unhidePost": True}
    assert await sql("SELECT 1 FROM hidden_posts") == []


async def test_hide_refuses_unknown_and_invisible_posts(client) -> None:
    viewer = await sign_up(client, "viewer")
    author = await sign_up(client, "author")
    secret = await post(client, author, "mine alone", "PRIVATE")
    friends = await post(client, author, "followers only", "FOLLOWERS")
    for op in ("HidePost", "UnhidePost"):
        for target in (secret, friends, 10**15):
            assert (await _hide(client, viewer, target, op)).codes == ["NOT_FOUND"]
        bad = await gql(client, op, {"id": "not-an-id"}, token=viewer)
        assert bad.codes == ["NOT_FOUND"]
    fewer = await gql(client, "ShowFewerLikeThis", {"postId": encode_post_id(secret)}, token=viewer)
    assert fewer.codes == ["NOT_FOUND"]
    # A follower sees the FOLLOWERS post, so may hide it.
    await follow(client, viewer, "author")
    assert (await _hide(client, viewer, friends)).ok() == {"hidePost": True}
    assert await sql("SELECT 1 FROM feed_feedback") == []


async def test_own_post_cannot_be_hidden(client) -> None:
    viewer = await sign_up(client, "viewer")
    mine = await post(client, viewer, "mine")
    assert (await _hide(client, viewer, mine)).codes == ["BAD_USER_INPUT"]
    variables = {"postId": encode_post_id(mine)}
    fewer = await gql(client, "ShowFewerLikeThis", variables, token=viewer)
    assert fewer.codes == ["BAD_USER_INPUT"]
    assert await sql("SELECT 1 FROM hidden_posts") == []
    assert await sql("SELECT 1 FROM feed_feedback") == []


async def test_anonymous_is_refused(client) -> None:
    author = await sign_up(client, "author")
    post_id = await post(client, author, "hello")
    for op, variables in (
        ("HidePost", {"id": encode_post_id(post_id)}),
        ("UnhidePost", {"id": encode_post_id(post_id)}),
        ("ShowFewerLikeThis", {"postId": encode_post_id(post_id)}),
        ("MuteAuthor", {"handle": "author"}),
        ("UnmuteAuthor", {"handle": "author"}),
    ):
        assert (await gql(client, op, variables)).codes == ["UNAUTHENTICATED"], op
    # Anonymous readers mute nobody: viewerMutes is false, mutedUsers null.
    query = '{ user(handle: "author") { viewerMutes mutedUsers { id } } }'
    assert (await gql(client, "", query=query)).ok()["user"] == {
        "viewerMutes": False,
        "mutedUsers": None,
    }


async def test_show_fewer_counts_per_author_once_per_post(client) -> None:
    viewer, viewer_id = await make_user(client, "viewer")
    author, author_id = await make_user(client, "author")
    first, second = [await post(client, author, f"p{i}") for i in range(2)]
    for post_id in (first, first, second):
        variables = {"postId": encode_post_id(post_id)}
        result = (await gql(client, "ShowFewerLikeThis", variables, token=viewer)).ok()
        assert result == {"showFewerLikeThis": True}
    rows = await sql("SELECT user_id, author_id, kind, count FROM feed_feedback")
    assert [tuple(r) for r in rows] == [(viewer_id, author_id, "fewer", 2)]
    hidden = await sql("SELECT post_id FROM hidden_posts ORDER BY post_id")
    assert [r["post_id"] for r in hidden] == [first, second]


async def test_mute_is_not_a_block(client) -> None:
    viewer = await sign_up(client, "viewer")
    author = await sign_up(client, "author")
    await follow(client, viewer, "author")
    await follow(client, author, "viewer")
    muted = (await gql(client, "MuteAuthor", {"handle": "author"}, token=viewer)).ok()
    user = muted["muteAuthor"]
    assert user["handle"] == "author" and user["viewerMutes"] is True
    assert user["viewerFollows"] is True and user["followerCount"] == 1  # follows stay
    again = (await gql(client, "MuteAuthor", {"handle": "@author"}, token=viewer)).ok()
    assert again["muteAuthor"]["viewerMutes"] is True
    assert len(await sql("SELECT 1 FROM mutes")) == 1
    # The muted user is told nothing: their view of the viewer is unchanged.
    theirs = await _profile(client, "viewer", author)
    assert theirs["viewerMutes"] is False and theirs["viewerFollows"] is True
    # The viewer still sees the muted author's profile and posts by handle.
    post_id = await post(client, author, "still on the profile")
    profile = await _profile(client, "author", viewer)
    assert profile["viewerMutes"] is True
    assert [int(e["node"]["id"]) for e in profile["posts"]["edges"]] == [post_id]
    unmuted = (await gql(client, "UnmuteAuthor", {"handle": "author"}, token=viewer)).ok()
    assert unmuted["unmuteAuthor"]["viewerMutes"] is False
    assert (await gql(client, "UnmuteAuthor", {"handle": "author"}, token=viewer)).ok()
    assert await sql("SELECT 1 FROM mutes") == []
    assert (await _profile(client, "author", viewer))["viewerFollows"] is True


async def test_mute_errors(client) -> None:
    viewer = await sign_up(client, "viewer")
    for op in ("MuteAuthor", "UnmuteAuthor"):
        assert (await gql(client, op, {"handle": "viewer"}, token=viewer)).codes == [
            "BAD_USER_INPUT"
        ]
        assert (await gql(client, op, {"handle": "nobody"}, token=viewer)).codes == ["NOT_FOUND"]
        assert (await gql(client, op, {"handle": ""}, token=viewer)).codes == ["NOT_FOUND"]
    # The table refuses a mute of oneself on its own too.
    rows = await sql("SELECT conname FROM pg_constraint WHERE conname = 'mutes_not_self'")
    assert len(rows) == 1


async def test_mute_cap(state) -> None:
    async with app_client(state, feedback_max_mutes=2) as client:
        viewer = await sign_up(client, "viewer")
        for handle in ("aaa1", "aaa2", "aaa3"):
            await sign_up(client, handle)
        for handle in ("aaa1", "aaa2"):
            (await gql(client, "MuteAuthor", {"handle": handle}, token=viewer)).ok()
        refused = await gql(client, "MuteAuthor", {"handle": "aaa3"}, token=viewer)
        assert refused.codes == ["BAD_USER_INPUT"]
        assert "unmute one first" in refused.errors[0]["message"]
        # Muting one already muted is no new mute: still fine at the cap.
        (await gql(client, "MuteAuthor", {"handle": "aaa1"}, token=viewer)).ok()
        (await gql(client, "UnmuteAuthor", {"handle": "aaa2"}, token=viewer)).ok()
        (await gql(client, "MuteAuthor", {"handle": "aaa3"}, token=viewer)).ok()


async def test_hide_cap_drops_the_oldest(state) -> None:
    async with app_client(state, feedback_max_hidden_posts=2) as client:
        viewer = await sign_up(client, "viewer")
        author = await sign_up(client, "author")
        made = [await post(client, author, f"p{i}") for i in range(3)]
        for post_id in made:
            (await _hide(client, viewer, post_id)).ok()
        rows = await sql("SELECT post_id FROM hidden_posts ORDER BY post_id")
        assert [r["post_id"] for r in rows] == made[1:]


async def test_muted_users_are_the_viewers_own(client) -> None:
    viewer = await sign_up(client, "viewer")
    other = await sign_up(client, "other")
    for handle in ("aaa1", "aaa2"):
        await sign_up(client, handle)
        (await gql(client, "MuteAuthor", {"handle": handle}, token=viewer)).ok()
    mine = (await gql(client, "MutedUsers", {}, token=viewer)).ok()["viewer"]["mutedUsers"]
    assert [(u["handle"], u["viewerMutes"]) for u in mine] == [("aaa2", True), ("aaa1", True)]
    capped = (await gql(client, "MutedUsers", {"first": 1}, token=viewer)).ok()
    assert [u["handle"] for u in capped["viewer"]["mutedUsers"]] == ["aaa2"]
    # Another user's list is never readable: null, and their own is empty.
    query = '{ user(handle: "viewer") { mutedUsers { id } } }'
    assert (await gql(client, "", token=other, query=query)).ok()["user"]["mutedUsers"] is None
    theirs = (await gql(client, "MutedUsers", {}, token=other)).ok()["viewer"]["mutedUsers"]
    assert theirs == []
    too_many = await gql(client, "MutedUsers", {"first": 101}, token=viewer)
    assert too_many.codes == ["BAD_USER_INPUT"]
    # Nor are hides: no field shows anyone's hidden posts.
    query = '{ __type(name: "User") { fields { name } } }'
    fields = (await gql(client, "", query=query)).ok()["__type"]["fields"]
    assert not [f["name"] for f in fields if "hid" in f["name"].lower()]


async def test_fewer_counts_is_the_ranking_feature(client, state) -> None:
    from app.social.feedback import fewer_counts

    viewer, viewer_id = await make_user(client, "viewer")
    author, author_id = await make_user(client, "author")
    _, other_id = await make_user(client, "other")
    for i in range(3):
        post_id = await post(client, author, f"p{i}")
        variables = {"postId": encode_post_id(post_id)}
        (await gql(client, "ShowFewerLikeThis", variables, token=viewer)).ok()
    async with state.sessions() as session:
        assert await fewer_counts(session, viewer_id, [author_id, other_id]) == {author_id: 3}
        assert await fewer_counts(session, viewer_id, []) == {}
