"""Issue 33: the unsigned list cursors (`posts`, `followers`, `following`, `comments`) carry a
date a client can forge. One whose date leaves the years 1-9999 once converted to UTC is
BAD_USER_INPUT, like any other malformed cursor: never INTERNAL, never a logged traceback."""

from __future__ import annotations

import base64
import logging

import pytest

from tests.helpers import create_post, gql, make_user

OUT_OF_RANGE = [
    "0001-01-01T00:00:00+14:00",  # before year 1 in UTC
    "9999-12-31T23:59:59-14:00",  # after year 9999 in UTC
    "0001-01-01T00:00:00.000001+23:59:59.999999",
]
IN_RANGE = ["0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59.999999+00:00"]


def cursor(stamp: str, row_id: int = 1) -> str:
    """A list cursor as the server writes them (app.posts.keyset), with any date."""
    raw = f"k1:{stamp}|{row_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.fixture
async def lists(client) -> tuple[str, dict[str, dict[str, str]]]:
    """A token and, per list, the operation and variables that page it."""
    token, _ = await make_user(client, "lister")
    await make_user(client, "other")
    await gql(client, "Follow", {"handle": "other"}, token=token)
    post = await create_post(client, token, "a post to comment on")
    return token, {
        "UserProfile": {"handle": "lister"},
        "Followers": {"handle": "other"},
        "Following": {"handle": "lister"},
        "PostComments": {"id": post["id"]},
    }


async def test_out_of_range_cursor_dates_are_bad_input(client, lists, caplog) -> None:
    token, operations = lists
    caplog.set_level(logging.ERROR)
    for op, variables in operations.items():
        for stamp in OUT_OF_RANGE:
            result = await gql(client, op, {**variables, "after": cursor(stamp)}, token=token)
            assert result.status == 200
            assert result.codes == ["BAD_USER_INPUT"], (op, stamp, result.errors)
            assert "cursor" in result.errors[0]["message"], result.errors
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_cursor_dates_at_the_edges_of_the_range_still_page(client, lists) -> None:
    token, operations = lists
    for op, variables in operations.items():
        for stamp in IN_RANGE:
            result = await gql(client, op, {**variables, "after": cursor(stamp)}, token=token)
            assert result.ok(), (op, stamp)
