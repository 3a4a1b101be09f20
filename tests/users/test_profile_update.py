"""Mutation.updateProfile through GraphQL: the new display name everywhere the user shows,
the sign-up rule for its length, a token, and the write rate limit."""

from __future__ import annotations

from tests.helpers import app_client, create_post, gql, make_user, sign_up


async def _update(client, token: str | None, name: str):
    return await gql(client, "UpdateProfile", {"displayName": name}, token=token)


async def test_update_profile_changes_the_display_name_everywhere(client) -> None:
    token, user_id = await make_user(client, "alice", "Alice")
    reader = await sign_up(client, "reader")
    created = await create_post(client, token, "hello")
    data = (await _update(client, token, "  Alice Liddell  ")).ok()["updateProfile"]
    assert data == {**data, "id": str(user_id), "handle": "alice", "displayName": "Alice Liddell"}
    assert (await gql(client, "Viewer", token=token)).ok()["viewer"]["displayName"] == (
        "Alice Liddell"
    )
    profile = (await gql(client, "UserProfile", {"handle": "alice"}, token=reader)).ok()
    assert profile["user"]["displayName"] == "Alice Liddell"
    shown = (await gql(client, "Post", {"id": created["id"]}, token=reader)).ok()
    assert shown["post"]["author"]["displayName"] == "Alice Liddell"
    found = (await gql(client, "SearchUsers", {"prefix": "alice lid"})).ok()["searchUsers"]
    assert [u["handle"] for u in found] == ["alice"]
    assert (await gql(client, "SearchUsers", {"prefix": "Alice L"})).ok()["searchUsers"]


async def test_display_name_length_follows_the_sign_up_rule(client) -> None:
    token = await sign_up(client, "alice")
    for bad in ("", "   ", "x" * 81):
        assert (await _update(client, token, bad)).codes == ["BAD_USER_INPUT"], bad
    assert (await _update(client, token, "x" * 80)).ok()["updateProfile"]["displayName"] == (
        "x" * 80
    )
    # signUp refuses the same names.
    result = await gql(
        client, "SignUp", {"handle": "bob", "password": "password123", "displayName": "y" * 81}
    )
    assert result.codes == ["BAD_USER_INPUT"]


async def test_update_profile_needs_a_token(client) -> None:
    assert (await _update(client, None, "Anon")).codes == ["UNAUTHENTICATED"]
    bad = await _update(client, "not-a-token", "Anon")
    assert bad.codes == ["UNAUTHENTICATED"]


async def test_update_profile_is_rate_limited_like_other_writes(state) -> None:
    async with app_client(state, rate_limit_writes_per_minute=3) as c:
        token = await sign_up(c, "fickle")  # counts against the client IP, not the user
        codes = [(await _update(c, token, f"Name {i}")).codes for i in range(4)]
        assert codes == [[], [], [], ["RATE_LIMITED"]]
        deletes = await gql(c, "DeleteComment", {"id": "1"}, token=token)
        assert deletes.codes == ["RATE_LIMITED"]  # deleteComment shares the budget
