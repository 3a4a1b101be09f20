"""Issue 33: user text is normalized (NFC) and checked before it is stored (app.text_rules).
Control characters, bidi overrides and isolates, zero-width characters (in names) and floods
of combining marks are BAD_USER_INPUT with a message naming the field; lengths count the
normalized text. A lone surrogate (a JSON escape no UTF-8 text can hold) in any field of a
request is refused whole (400, BAD_USER_INPUT), never INTERNAL nor a 500."""

from __future__ import annotations

import json
import logging
import unicodedata
from typing import Any

import httpx
import pytest

from app.operation_documents import operations
from tests.helpers import PASSWORD, Result, create_post, gql, make_user

ZALGO = "z" + "\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308" * 3 + "algo"
NAME_REFUSED = [
    "admin\u202egnp.exe",  # right-to-left override
    "a\u2066b\u2069",  # isolates
    "bob\u200f",  # right-to-left mark
    "bo\u200bb",  # zero width space
    "bo\u200db",  # zero width joiner
    "\ufeffbob",  # byte order mark
    "bo\u2060b",  # word joiner
    "bob\x07",  # C0 control
    "bob\x85x",  # C1 control
    "bob\nsmith",  # a newline is no part of a name
    "bob\tsmith",
    ZALGO,
]
BODY_REFUSED = [
    "look \u202eright to left",
    "isolated \u2067text",
    "bell \x07",
    "escape \x1b[31mred",
    "C1 \x9b",
    "del \x7f",
    ZALGO,
]


async def send(
    client: httpx.AsyncClient, op: str, variables: dict[str, Any], token: str | None = None
) -> Result:
    """Like tests.helpers.gql, with the body JSON-escaped as ASCII: a lone surrogate goes as
    a "\\ud800" escape, as a client written in another language may send it."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    payload = {"query": operations()[op], "variables": variables, "operationName": op}
    response = await client.post("/graphql", content=json.dumps(payload), headers=headers)
    body = response.json()
    return Result(response.status_code, body.get("data"), body.get("errors") or [])


async def test_display_names_refuse_invisible_and_control_characters(client, caplog) -> None:
    caplog.set_level(logging.ERROR)
    token, _ = await make_user(client, "namer")
    for i, name in enumerate(NAME_REFUSED):
        update = await send(client, "UpdateProfile", {"displayName": name}, token=token)
        assert update.codes == ["BAD_USER_INPUT"], (name, update.errors)
        assert "display name" in update.errors[0]["message"], update.errors
        variables = {"handle": f"newbie{i}", "password": PASSWORD, "displayName": name}
        sign = await send(client, "SignUp", variables)
        assert sign.codes == ["BAD_USER_INPUT"], (name, sign.errors)
    viewer = (await gql(client, "Viewer", token=token)).ok()["viewer"]
    assert viewer["displayName"] == "namer"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


@pytest.mark.parametrize("handle", ["ali\u202ece", "bob\u200b", "bob\u2028", "bob\x1f"])
async def test_handles_refuse_what_is_not_plain_ascii(client, handle: str) -> None:
    sign = await send(client, "SignUp", {"handle": handle, "password": PASSWORD})
    assert sign.codes == ["BAD_USER_INPUT"], sign.errors
    assert "handle" in sign.errors[0]["message"]


async def test_bodies_refuse_controls_bidi_overrides_and_combining_floods(client, caplog) -> None:
    caplog.set_level(logging.ERROR)
    token, _ = await make_user(client, "writer")
    post = await create_post(client, token, "first")
    for body in BODY_REFUSED:
        created = await send(client, "CreatePost", {"body": body}, token=token)
        assert created.codes == ["BAD_USER_INPUT"], (body, created.errors)
        assert "post" in created.errors[0]["message"], created.errors
        edited = await send(client, "EditPost", {"id": post["id"], "body": body}, token=token)
        assert edited.codes == ["BAD_USER_INPUT"], (body, edited.errors)
        comment = await send(
            client, "AddComment", {"postId": post["id"], "body": body}, token=token
        )
        assert comment.codes == ["BAD_USER_INPUT"], (body, comment.errors)
        assert "comment" in comment.errors[0]["message"], comment.errors
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_text_is_stored_nfc_and_measured_after_normalizing(client) -> None:
    decomposed = "Vie\u0302\u0323t"  # NFD: e, circumflex, dot below
    composed = unicodedata.normalize("NFC", decomposed)
    assert composed == "Vi\u1ec7t"
    token, _ = await make_user(client, "nfc_user", name=decomposed)
    viewer = (await gql(client, "Viewer", token=token)).ok()["viewer"]
    assert viewer["displayName"] == composed
    # 80 characters once composed (160 as sent) is within the display-name limit.
    update = await gql(client, "UpdateProfile", {"displayName": "e\u0301" * 80}, token=token)
    assert update.ok()["updateProfile"]["displayName"] == "\u00e9" * 80
    # Newlines and tabs stay in bodies (CR LF becomes LF); so do emoji joined by ZWJ,
    # a right-to-left mark and a few combining marks.
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    body = f"line one\r\n\tline two {family} \u200fשלום a\u0301\u0302"
    created = await create_post(client, token, body)
    expected = unicodedata.normalize("NFC", body.replace("\r\n", "\n"))
    assert created["body"] == expected
    long_nfd = "e\u0301" * 500  # 1,000 code points sent, 500 stored: within MAX_BODY_CHARS
    assert (await create_post(client, token, long_nfd))["body"] == "\u00e9" * 500
    comment = await gql(
        client, "AddComment", {"postId": created["id"], "body": long_nfd}, token=token
    )
    assert comment.ok()["addComment"]["body"] == "\u00e9" * 500


LONE = ["\ud800", "\udfff", "a\udc00b", "\ud83d"]  # the last: half of an emoji's pair


async def test_lone_surrogates_are_refused_in_any_field(client, caplog) -> None:
    caplog.set_level(logging.ERROR)
    token, _ = await make_user(client, "surrogates")
    post = await create_post(client, token, "a post")
    for lone in LONE:
        cases: list[tuple[str, dict[str, Any], str | None]] = [
            ("UpdateProfile", {"displayName": f"bob{lone}"}, token),
            ("CreatePost", {"body": f"x{lone}"}, token),
            ("CreatePost", {"body": "x", "idempotencyKey": lone}, token),
            ("EditPost", {"id": post["id"], "body": lone}, token),
            ("AddComment", {"postId": post["id"], "body": lone, "idempotencyKey": lone}, token),
            ("SignUp", {"handle": "newbie", "password": f"password{lone}"}, None),
            ("LogIn", {"handle": f"surrogates{lone}", "password": PASSWORD}, None),
            ("SearchUsers", {"prefix": f"s{lone}"}, token),
            ("Follow", {"handle": lone}, token),
            ("UserProfile", {"handle": "surrogates", "after": lone}, token),
        ]
        for op, variables, who in cases:
            result = await send(client, op, variables, who)
            assert result.status in (200, 400), (op, lone, result)
            assert result.codes == ["BAD_USER_INPUT"], (op, lone, result.errors)
        named = await client.post(
            "/graphql",
            content=json.dumps({"query": "{ viewer { id } }", "operationName": lone}),
            headers={"Content-Type": "application/json"},
        )
        assert named.status_code == 400, named.text
        assert named.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    # A pair escaped as two \\u escapes is one character, taken as sent.
    emoji = await send(client, "CreatePost", {"body": "hi \U0001f600"}, token)
    assert emoji.ok()["createPost"]["body"] == "hi \U0001f600"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
