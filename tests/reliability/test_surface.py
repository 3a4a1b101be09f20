"""A surface that holds against abuse (issue 11): query cost, read and log-in budgets, bounded
Argon2, capped feed sessions, Redis failures that degrade, the secret key, bad input."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from graphql import parse, validate

from app.api.endpoint.schema import build_schema
from app.config import PROJECT_ROOT, get_settings
from app.operation_documents import operations
from app.state import AppState, create_state
from app.web import create_app
from tests.helpers import (
    PASSWORD,
    app_client,
    counting_statements,
    follow,
    gql,
    make_user,
    post,
    sign_up,
)
from tests.pipeline import Pipeline
from tests.servers import ApiServer

NESTED = """
  %s: user(handle: "%s") {
    posts(first: %d) { edges { node { author { posts(first: %d) { edges { node { id } } } } } } }
  }"""


def nested_query(handle: str, aliases: int, outer: int = 100, inner: int = 100) -> str:
    fields = "".join(NESTED % (f"a{i}", handle, outer, inner) for i in range(aliases))
    return "query {" + fields + "\n}"


# -- query cost ------------------------------------------------------------------------------


async def test_nested_pages_with_aliases_are_refused_before_execution(
    client: httpx.AsyncClient,
) -> None:
    await sign_up(client, "victim")
    limit = get_settings().query_cost_limit
    # QUERY_COST (50) per statement plus rows: user 50 + 1, posts 50 + 100, author 50 + 100,
    # the inner posts 50 + 100 x 100 (docs/decisions/0012-query-cost.md).
    for aliases, cost in ((20, 20 * 10_401), (1, 10_401)):
        result = await gql(client, "", query=nested_query("victim", aliases))
        assert result.data is None
        assert result.codes == ["BAD_USER_INPUT"], result.errors
        error = result.errors[0]
        assert f"{cost:,}" in error["message"] and f"{limit:,}" in error["message"]
        assert error["extensions"]["cost"] == cost
        assert error["extensions"]["limit"] == limit


async def test_small_nested_pages_run(client: httpx.AsyncClient) -> None:
    token = await sign_up(client, "writer")
    for i in range(3):
        await post(client, token, f"post {i}")
    result = await gql(client, "", query=nested_query("writer", 2, outer=10, inner=2))
    data = result.ok()
    nodes = [e["node"] for e in data["a0"]["posts"]["edges"]]
    assert len(nodes) == 3
    assert all(len(n["author"]["posts"]["edges"]) == 2 for n in nodes)


def test_registered_documents_are_within_the_budget() -> None:
    """Checked at start-up (build_schema registers them with the same rules); their costs
    are the figures of docs/decisions/0012-query-cost.md."""
    from app.api.schema.cost import create_cost_rule

    schema = build_schema(get_settings())._schema
    limit = get_settings().query_cost_limit
    costs = {}
    for name, text in operations().items():
        probe = create_cost_rule(0)  # every document is "over" 0: the error carries its cost
        errors = validate(schema, parse(text), [probe])
        costs[name] = errors[0].extensions["cost"] if errors else 0  # type: ignore[index]
    assert costs["Feed"] == 600 and costs["UserProfile"] == 702, costs
    assert max(costs.values()) <= limit


async def test_user_posts_of_many_authors_take_one_query(
    client: httpx.AsyncClient, state: AppState, pipeline: Pipeline
) -> None:
    """`author { posts }` under a page of posts by n authors: as many statements for 6
    authors as for 2 (one batched page query, not one per author)."""
    reader = await sign_up(client, "reader")
    for i in range(6):
        author = await sign_up(client, f"author{i}")
        await post(client, author, f"from author {i}")
        await follow(client, reader, f"author{i}")
    await pipeline.settle()  # type: ignore[attr-defined]
    query = """query($n: Int!) { feed(first: $n, mode: CHRONOLOGICAL) { edges { node {
        author { handle posts(first: 3) { edges { node { id body } } } } } } } }"""
    await gql(client, "", {"n": 1}, token=reader, query=query)  # first read: activity marks
    counts = []
    for n in (2, 6):
        with counting_statements(state) as seen:
            data = (await gql(client, "", {"n": n}, token=reader, query=query)).ok()
        edges = data["feed"]["edges"]
        assert len(edges) == n
        assert all(len(e["node"]["author"]["posts"]["edges"]) == 1 for e in edges)
        counts.append(len(seen))
    assert counts[0] == counts[1], counts


# -- read and log-in budgets -----------------------------------------------------------------


async def test_reads_have_per_user_and_per_ip_budgets(state: AppState) -> None:
    async with app_client(
        state, rate_limit_reads_per_minute=3, rate_limit_reads_per_ip_per_minute=5
    ) as client:
        token = await sign_up(client, "reader")
        for _ in range(3):
            (await gql(client, "Viewer", token=token)).ok()
        refused = await gql(client, "Viewer", token=token)
        assert refused.codes == ["RATE_LIMITED"]
        retry = refused.errors[0]["extensions"]["retryAfter"]
        assert isinstance(retry, int) and 1 <= retry <= 60
        # Anonymous reads from the same IP: 4 counted so far, one more fits, then refused.
        (await gql(client, "Viewer")).ok()
        assert (await gql(client, "Viewer")).codes == ["RATE_LIMITED"]


async def test_login_guesses_per_handle_and_ip_hold_whatever_token_is_sent(
    state: AppState,
) -> None:
    async with app_client(
        state,
        rate_limit_login_failures_per_handle_and_ip=3,
        rate_limit_login_per_ip_per_minute=100,
    ) as client:
        await sign_up(client, "victim")
        throwaways = [await sign_up(client, f"throwaway{i}") for i in range(4)]
        for token in throwaways[:3]:
            guess = await gql(client, "LogIn", {"handle": "victim", "password": "guess-123"}, token)
            assert guess.codes == ["UNAUTHENTICATED"]
        right = {"handle": "VICTIM", "password": PASSWORD}  # the handle normalized, too
        refused = await gql(client, "LogIn", right, token=throwaways[3])
        assert refused.codes == ["RATE_LIMITED"]
        assert refused.errors[0]["extensions"]["retryAfter"] >= 1
        # Another handle has its own budget.
        (await gql(client, "LogIn", {"handle": "throwaway0", "password": PASSWORD})).ok()


async def _early_in_a_minute(budget_seconds: float = 20.0) -> None:
    """Wait, if needed, until the current fixed one-minute window has `budget_seconds` left:
    four Argon2 log-ins on a loaded machine must not straddle two windows."""
    left = 60 - time.time() % 60
    if left < budget_seconds:
        await asyncio.sleep(left + 0.05)


async def test_login_budget_per_ip(state: AppState) -> None:
    async with app_client(state, rate_limit_login_per_ip_per_minute=3) as client:
        token = await sign_up(client, "someone")
        await _early_in_a_minute()  # the budget's window is a fixed minute
        for i in range(3):
            wrong = {"handle": f"nobody{i}", "password": "guess-123"}
            assert (await gql(client, "LogIn", wrong, token=token)).codes == ["UNAUTHENTICATED"]
        right = {"handle": "someone", "password": PASSWORD}
        assert (await gql(client, "LogIn", right)).codes == ["RATE_LIMITED"]


async def test_concurrent_password_hashes_are_bounded() -> None:
    """One Argon2 slot and no wait: of simultaneous log-ins some answer OVERLOADED (with a
    retry hint), the others succeed; none fails otherwise."""
    env = {
        "PASSWORD_HASH_CONCURRENCY": "1",
        "PASSWORD_HASH_WAIT_MS": "0",
        "RATE_LIMIT_LOGIN_PER_IP_PER_MINUTE": "1000",
    }
    async with ApiServer(env=env) as api, httpx.AsyncClient(base_url=api.url, timeout=30) as c:
        await sign_up(c, "busy")
        login = {"handle": "busy", "password": PASSWORD}
        results = await asyncio.gather(*(gql(c, "LogIn", login) for _ in range(8)))
        codes = [r.codes[0] if r.codes else "OK" for r in results]
        assert set(codes) == {"OK", "OVERLOADED"}, codes
        overloaded = next(r for r in results if r.codes)
        assert overloaded.errors[0]["extensions"]["retryAfter"] == 1


# -- feed sessions ---------------------------------------------------------------------------

FIRST_PAGE = "query { feed(first: 1) { sessionId pageInfo { endCursor hasNextPage } } }"
NEXT_PAGE = "query($after: String) { feed(first: 1, after: $after) { edges { node { id } } } }"


async def test_open_feed_sessions_per_viewer_are_capped(
    client: httpx.AsyncClient, state: AppState
) -> None:
    from app.feed.sessions import _index_key

    cap = state.settings.feed_sessions_per_viewer
    token, viewer = await make_user(client, "scroller")
    await post(client, token, "first")
    cursors = []
    for i in range(cap + 1):
        await post(client, token, f"post {i}")  # new candidates: a new session each time
        page = (await gql(client, "", token=token, query=FIRST_PAGE)).ok()["feed"]
        assert page["sessionId"] and page["pageInfo"]["hasNextPage"]
        cursors.append(page["pageInfo"]["endCursor"])
    assert len({c for c in cursors}) == cap + 1
    oldest = await gql(client, "", {"after": cursors[0]}, token=token, query=NEXT_PAGE)
    assert oldest.codes == ["CURSOR_EXPIRED"]
    for cursor in cursors[1:]:
        (await gql(client, "", {"after": cursor}, token=token, query=NEXT_PAGE)).ok()
    assert await state.redis.zcard(_index_key(viewer)) == cap


# -- Redis failures --------------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A TCP server that accepts and never answers: a hung Redis."""
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        for writer in held:
            writer.close()
        server.close()


@asynccontextmanager
async def app_on_redis(state: AppState, port: int, **settings: Any) -> AsyncIterator[Any]:
    changed = state.settings.model_copy(
        update={
            "redis_url": f"redis://127.0.0.1:{port}/0",
            "redis_socket_timeout_seconds": 0.5,
            "redis_connect_timeout_seconds": 0.5,
            **settings,
        }
    )
    broken = create_state(changed, pool_size=4)
    transport = httpx.ASGITransport(app=create_app(broken))
    try:
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", timeout=30
        ) as c:
            yield c
    finally:
        await broken.close()


async def exercise_without_redis(client: httpx.AsyncClient) -> None:
    """Sign up, log in, post, read: every answer a success (feeds from PostgreSQL)."""
    token = await sign_up(client, "offline")
    other = await sign_up(client, "friend")
    (await gql(client, "LogIn", {"handle": "offline", "password": PASSWORD})).ok()
    post_id = await post(client, other, "written while Redis is down")
    assert (await gql(client, "Post", {"id": str(post_id)}, token=token)).ok()["post"]
    profile = (await gql(client, "UserProfile", {"handle": "friend"})).ok()
    assert [e["node"]["id"] for e in profile["user"]["posts"]["edges"]] == [str(post_id)]
    own = await post(client, token, "mine")
    feed = (await gql(client, "Feed", {"first": 5}, token=token)).ok()["feed"]
    assert str(own) in [e["node"]["id"] for e in feed["edges"]]
    assert feed["degraded"] is True


async def test_unreachable_redis_degrades_instead_of_failing(state: AppState) -> None:
    async with app_on_redis(state, closed_port()) as client:
        await exercise_without_redis(client)


async def test_hung_redis_fails_fast_and_degrades(state: AppState) -> None:
    async with silent_server() as port, app_on_redis(state, port) as client:
        await asyncio.wait_for(exercise_without_redis(client), timeout=60)


async def test_local_fallback_limiter_still_limits(state: AppState) -> None:
    from app.ratelimit import forget_local

    forget_local()  # earlier tests without Redis counted this client in process
    async with app_on_redis(state, closed_port(), rate_limit_writes_per_minute=2) as client:
        await sign_up(client, "first")
        await sign_up(client, "second")
        refused = await gql(client, "SignUp", {"handle": "third", "password": PASSWORD})
        assert refused.codes == ["RATE_LIMITED"]


async def test_local_fallback_counts_password_guesses(state: AppState) -> None:
    from app.auth.guesses import forget_local

    forget_local()
    settings = {"rate_limit_login_failures_per_handle_and_ip": 2}
    async with app_on_redis(state, closed_port(), **settings) as client:
        await sign_up(client, "victim")
        wrong = {"handle": "victim", "password": "guess-123"}
        for _ in range(2):
            assert (await gql(client, "LogIn", wrong)).codes == ["UNAUTHENTICATED"]
        right = {"handle": "victim", "password": PASSWORD}
        refused = await gql(client, "LogIn", right)
        assert refused.codes == ["RATE_LIMITED"]
        assert 60 < refused.errors[0]["extensions"]["retryAfter"] <= 900


# -- the secret key --------------------------------------------------------------------------


def start_app(secret: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SECRET_KEY": secret}
    return subprocess.run(
        [sys.executable, "-c", "import app.web"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_short_or_empty_secret_key_is_refused_at_start_up() -> None:
    for secret in ("secret", "", "x" * 31):
        started = start_app(secret)
        assert started.returncode != 0
        assert "SECRET_KEY must be at least 32 bytes" in started.stderr, started.stderr[-2000:]
    assert start_app("y" * 32).returncode == 0


def test_dev_key_is_private_and_written_once(tmp_path: Path) -> None:
    from app.config import dev_secret

    path = tmp_path / "run" / "secret_key"
    script = (
        "import sys, pathlib; from app.config import dev_secret; "
        "print(dev_secret(pathlib.Path(sys.argv[1])))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path)],
            cwd=PROJECT_ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(keys) == 1 and len(next(iter(keys))) >= 32
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]  # no temporary left
    assert dev_secret(path) in keys
    # A key file an older version left empty and readable: replaced, private.
    path.write_text("")
    path.chmod(0o644)
    fresh = dev_secret(path)
    assert len(fresh) >= 32 and path.read_text() == fresh
    assert path.stat().st_mode & 0o777 == 0o600


# -- bad input -------------------------------------------------------------------------------


async def test_odd_post_ids_are_not_found(client: httpx.AsyncClient) -> None:
    token = await sign_up(client, "prober")
    for raw in ("²", "9" * 19, str(2**63), "١٢٣"):
        found = await gql(client, "Post", {"id": raw}, token=token)
        assert found.ok()["post"] is None, raw
        liked = await gql(client, "LikePost", {"id": raw}, token=token)
        assert liked.codes == ["NOT_FOUND"], (raw, liked.errors)


async def test_nul_in_text_is_bad_input(client: httpx.AsyncClient) -> None:
    token = await sign_up(client, "nul")
    as_variable = await gql(client, "CreatePost", {"body": "a\x00b"}, token=token)
    assert as_variable.codes == ["BAD_USER_INPUT"]
    literal = 'mutation { createPost(body: "a\\u0000b") { id } }'
    assert (await gql(client, "", token=token, query=literal)).codes == ["BAD_USER_INPUT"]
    login = await gql(client, "LogIn", {"handle": "nul", "password": "pass\x00word"})
    assert login.codes == ["BAD_USER_INPUT"]


async def test_oversized_chunked_body_gets_a_typed_413(client: httpx.AsyncClient) -> None:
    limit = get_settings().max_request_bytes

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"query": "{ viewer { id } }", "variables": {"pad": "'
        for _ in range(limit // 4096 + 2):
            yield b"x" * 4096
        yield b'"}}'

    response = await client.post(
        "/graphql", content=chunks(), headers={"content-type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
