"""Every public error code is reachable from bad input, typed, and never a 500 or a trace."""

from __future__ import annotations

import dataclasses

import httpx

from app.state import create_state
from app.web import create_app
from tests.helpers import gql, sign_up


async def test_bad_user_input_cases(client) -> None:
    token = await sign_up(client, "alice")
    cases = [
        ("CreatePost", {"body": "   "}),
        ("CreatePost", {"body": "x" * 501}),
        ("CreatePost", {"body": "ok", "idempotencyKey": "k" * 101}),
        ("UserProfile", {"handle": "alice", "first": 0}),
        ("UserProfile", {"handle": "alice", "first": 101}),
        ("UserProfile", {"handle": "alice", "after": "garbage"}),
        ("AddComment", {"postId": "1" * 19, "body": ""}),
        ("Follow", {"handle": "alice"}),
    ]
    for op, variables in cases:
        result = await gql(client, op, variables, token=token)
        assert result.status == 200
        assert result.codes == ["BAD_USER_INPUT"], (op, variables, result.errors)
        assert "Traceback" not in str(result.errors)
    sign = await gql(client, "SignUp", {"handle": "no spaces!", "password": "password123"})
    assert sign.codes == ["BAD_USER_INPUT"]
    short = await gql(client, "SignUp", {"handle": "newbie", "password": "short"})
    assert short.codes == ["BAD_USER_INPUT"]
    # 500 characters is the limit, inclusive.
    assert (await gql(client, "CreatePost", {"body": "y" * 500}, token=token)).ok()


async def test_malformed_documents_are_typed_errors(client) -> None:
    syntax = await gql(client, "", query="query { viewer { ")
    assert syntax.codes == ["BAD_USER_INPUT"]
    unknown = await gql(client, "", query="query { nope }")
    assert unknown.codes == ["BAD_USER_INPUT"]
    wrong_type = await gql(
        client,
        "",
        query='query($f: Int) { user(handle: "a") { posts(first: $f) { edges { cursor } } } }',
    )
    assert wrong_type.data is not None or wrong_type.errors
    deep = (
        "query { viewer { "
        + "posts { edges { node { author { " * 4
        + "id"
        + " } } } }" * 4
        + " } }"
    )
    too_deep = await gql(client, "", query=deep)
    assert too_deep.codes and set(too_deep.codes) == {"BAD_USER_INPUT"}
    assert "depth" in too_deep.errors[0]["message"]


async def test_not_graphql_at_all_is_400(client) -> None:
    response = await client.post(
        "/graphql", content=b"hello", headers={"content-type": "text/plain"}
    )
    assert response.status_code in (400, 415)
    empty = await client.post("/graphql", json={})
    assert empty.status_code == 400


async def test_oversized_body_is_refused(client) -> None:
    response = await client.post(
        "/graphql", json={"query": "{ viewer { id } }", "pad": "x" * 70_000}
    )
    assert response.status_code == 413
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_rate_limited(state) -> None:
    tight = dataclasses.replace(
        state, settings=state.settings.model_copy(update={"rate_limit_writes_per_minute": 3})
    )
    app = create_app(tight)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        token = await sign_up(c, "spammer")
        codes = []
        # 3 a minute: the 4th is refused, or, if the minute turns over mid-loop, the 7th.
        for i in range(7):
            codes.append((await gql(c, "CreatePost", {"body": f"spam {i}"}, token=token)).codes)
    assert codes[0] == []
    assert ["RATE_LIMITED"] in codes[3:], codes


async def test_an_unreachable_database_is_unavailable_and_masked(state) -> None:
    """PostgreSQL out of reach is the typed, retryable UNAVAILABLE (decision 0019), never
    INTERNAL, and the driver's words (the address) stay in the server log."""
    broken_settings = state.settings.model_copy(
        update={"database_url": "postgresql://postgres@127.0.0.1:1/nowhere"}
    )
    broken = create_state(broken_settings)
    app = create_app(broken)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://t"
        ) as c:
            result = await gql(c, "UserProfile", {"handle": "alice"})
            health = await c.get("/healthz")
    finally:
        await broken.close()
    assert result.status == 200
    assert result.codes == ["UNAVAILABLE"]
    assert result.errors[0]["extensions"]["retryAfter"] == 2
    assert "127.0.0.1" not in result.errors[0]["message"]
    assert "Traceback" not in str(result.errors)
    assert health.status_code == 503


async def test_health_metrics_and_graphiql(client) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    metrics = await client.get("/metrics")
    assert "feed_graphql_request_seconds" in metrics.text
    ide = await client.get("/graphql", headers={"accept": "text/html"})
    assert ide.status_code == 200 and "graphiql" in ide.text.lower()
