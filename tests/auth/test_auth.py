"""Sign-up, log-in and the token rules, through GraphQL over HTTP."""

from __future__ import annotations

from tests.helpers import gql, sign_up


async def test_sign_up_then_log_in_and_viewer(client) -> None:
    token = await sign_up(client, "alice", "correct-horse")
    viewer = (await gql(client, "Viewer", token=token)).ok()["viewer"]
    assert viewer["handle"] == "alice"
    assert viewer["fanoutMode"] == "PUSH"

    logged = (await gql(client, "LogIn", {"handle": "Alice", "password": "correct-horse"})).ok()
    assert logged["logIn"]["user"]["id"] == viewer["id"]
    again = (await gql(client, "Viewer", token=logged["logIn"]["token"])).ok()
    assert again["viewer"]["handle"] == "alice"


async def test_bad_password_and_unknown_user_look_the_same(client) -> None:
    await sign_up(client, "bob", "correct-horse")
    wrong = await gql(client, "LogIn", {"handle": "bob", "password": "wrong-horse"})
    missing = await gql(client, "LogIn", {"handle": "nobody", "password": "wrong-horse"})
    assert wrong.codes == missing.codes == ["UNAUTHENTICATED"]
    assert wrong.errors[0]["message"] == missing.errors[0]["message"]
    assert wrong.status == 200


async def test_duplicate_handle_is_conflict(client) -> None:
    await sign_up(client, "carol")
    dup = await gql(client, "SignUp", {"handle": "CAROL", "password": "password123"})
    assert dup.codes == ["CONFLICT"]


async def test_viewer_without_token_is_null_and_bad_token_is_rejected(client) -> None:
    assert (await gql(client, "Viewer")).ok() == {"viewer": None}
    bad = await gql(client, "Viewer", token="not-a-token")
    assert bad.codes == ["UNAUTHENTICATED"]


async def test_mutations_need_a_token(client) -> None:
    result = await gql(client, "CreatePost", {"body": "hello"})
    assert result.codes == ["UNAUTHENTICATED"]
    assert result.data is None
