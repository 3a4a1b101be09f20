"""What the tests do as a client would, in one place.

- `gql`: run one of the project's own operation documents (graphql/operations) over HTTP,
  against the in-process app (the `client` fixture) or a running server (`server.http()`).
- Steps through the API: `sign_up` (a token), `make_user` (token and id), `follow`,
  `unfollow`, `block`, `unblock`, `create_post` (the payload), `post` (the id), `feed_ids`,
  and `author_with_fans` (an author and N followers: the fan-out tests' usual start).
- Peeks behind the API: `sql` (Postgres), `timeline_ids` (a Redis home timeline),
  `metric_value` (one sample of a /metrics text).
- Reading answers: `ids` (the node ids of a connection), `codes` (the error codes of a body).
- `post_id_at`: a post id of a given millisecond, for tests that build timelines directly.
- `run_module`: `python -m <module> ...` of the project (its command lines), to the end;
  `readme_bulk_seed_command`: the README's bulk-seed command line, as argv;
  `counting_statements`: the SQL statements the app sends meanwhile.
- `eventually`: poll a condition instead of sleeping for a guessed time; `MonotonicClock`:
  a clock to put in place of a module's `time` (monkeypatch), to let hours pass at once.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import asyncpg
import httpx

from app.config import PROJECT_ROOT
from app.operation_documents import operations
from app.posts import keyset
from app.posts.ids import EPOCH_MS, SEQUENCE_BITS
from tests.conftest import TEST_DATABASE_URL, TEST_DB

PASSWORD = "password123"
T = TypeVar("T")


# -- GraphQL over HTTP -----------------------------------------------------------------------


@dataclass
class Result:
    status: int
    data: dict[str, Any] | None
    errors: list[dict[str, Any]]

    @property
    def codes(self) -> list[str]:
        return [e.get("extensions", {}).get("code", "") for e in self.errors]

    def ok(self) -> dict[str, Any]:
        assert self.status == 200, self.status
        assert not self.errors, self.errors
        assert self.data is not None
        return self.data


async def gql(
    client: httpx.AsyncClient,
    operation: str,
    variables: dict[str, Any] | None = None,
    token: str | None = None,
    query: str | None = None,
) -> Result:
    """Run a named operation from graphql/operations (or a raw query when given)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    payload: dict[str, Any] = {
        "query": query or operations()[operation],
        "variables": variables or {},
    }
    if query is None:
        payload["operationName"] = operation
    response = await client.post("/graphql", json=payload, headers=headers)
    body = response.json()
    return Result(response.status_code, body.get("data"), body.get("errors") or [])


# -- steps through the API -------------------------------------------------------------------


async def make_user(
    client: httpx.AsyncClient, handle: str, name: str | None = None, password: str = PASSWORD
) -> tuple[str, int]:
    """Sign up; (token, user id)."""
    variables = {"handle": handle, "password": password}
    if name:
        variables["displayName"] = name
    data = (await gql(client, "SignUp", variables)).ok()
    return str(data["signUp"]["token"]), int(data["signUp"]["user"]["id"])


async def sign_up(
    client: httpx.AsyncClient, handle: str, password: str = PASSWORD, name: str | None = None
) -> str:
    """Sign up; the token (most tests need no more)."""
    return (await make_user(client, handle, name, password))[0]


def log_in_request(http: httpx.AsyncClient, handle: str) -> Awaitable[httpx.Response]:
    """A logIn request with PASSWORD, not awaited yet (to send many at once)."""
    return http.post(
        "/graphql",
        json={
            "query": "mutation($h: String!, $p: String!) { logIn(handle: $h, password: $p) "
            "{ token } }",
            "variables": {"h": handle, "p": PASSWORD},
        },
    )


async def follow(client: httpx.AsyncClient, token: str, handle: str) -> None:
    (await gql(client, "Follow", {"handle": handle}, token=token)).ok()


async def unfollow(client: httpx.AsyncClient, token: str, handle: str) -> None:
    (await gql(client, "Unfollow", {"handle": handle}, token=token)).ok()


async def block(client: httpx.AsyncClient, token: str, handle: str) -> None:
    (await gql(client, "Block", {"handle": handle}, token=token)).ok()


async def unblock(client: httpx.AsyncClient, token: str, handle: str) -> None:
    (await gql(client, "Unblock", {"handle": handle}, token=token)).ok()


async def author_with_fans(
    client: httpx.AsyncClient,
    fans: int | Sequence[str],
    following: int | None = None,
    author: str = "author",
) -> tuple[str, int, list[tuple[str, int]]]:
    """User `author` and its fans (`fans` handles, or that many: fan0, fan1...), of whom the
    first `following` (all by default) follow the author; nothing is fanned out yet.
    The author's token and id, and each fan's (token, id)."""
    handles = [f"fan{i}" for i in range(fans)] if isinstance(fans, int) else list(fans)
    token, author_id = await make_user(client, author)
    made = [await make_user(client, handle) for handle in handles]
    for fan, _ in made[:following]:
        await follow(client, fan, author)
    return token, author_id, made


async def create_post(
    client: httpx.AsyncClient, token: str, body: str = "hello world", **variables: Any
) -> dict[str, Any]:
    """createPost with any of its variables (visibility, idempotencyKey); its payload."""
    data = (await gql(client, "CreatePost", {"body": body, **variables}, token=token)).ok()
    return dict(data["createPost"])


async def post(client: httpx.AsyncClient, token: str, body: str, visibility: str = "PUBLIC") -> int:
    """createPost; the new post's id."""
    return int((await create_post(client, token, body, visibility=visibility))["id"])


async def feed_ids(
    client: httpx.AsyncClient, token: str, first: int = 100, mode: str = "RANKED"
) -> list[int]:
    """The ids of the viewer's first feed page."""
    variables = {"first": first, "mode": mode}
    return ids((await gql(client, "Feed", variables, token=token)).ok()["feed"])


def ids(connection: dict[str, Any]) -> list[int]:
    """The node ids of a connection's edges (a feed page, a list of posts), in order."""
    return [int(e["node"]["id"]) for e in connection["edges"]]


def codes(body: dict[str, Any]) -> list[str]:
    """The `extensions.code` of each error of a GraphQL response body ([] for none)."""
    return [e.get("extensions", {}).get("code") for e in body.get("errors") or []]


async def fanout_mode(client: httpx.AsyncClient, handle: str) -> str:
    data = (await gql(client, "UserProfile", {"handle": handle})).ok()
    return str(data["user"]["fanoutMode"])


# -- peeks behind the API --------------------------------------------------------------------


@asynccontextmanager
async def db() -> AsyncIterator[asyncpg.Connection]:
    """A plain connection to the test database."""
    conn = await asyncpg.connect(TEST_DATABASE_URL)
    try:
        yield conn
    finally:
        await conn.close()


async def sql(query: str, *args: object) -> list[asyncpg.Record]:
    async with db() as conn:
        return await conn.fetch(query, *args)


@asynccontextmanager
async def row_locked(user_id: int) -> AsyncIterator[None]:
    """The user's row locked FOR UPDATE in an open transaction until the block ends: every
    logIn of the user (it UPDATEs the row) waits in PostgreSQL, in flight, meanwhile."""
    conn = await asyncpg.connect(TEST_DATABASE_URL)
    try:
        async with conn.transaction():
            await conn.execute("SELECT 1 FROM users WHERE id = $1 FOR UPDATE", user_id)
            yield
    finally:
        await conn.close()


async def waiting_on_locks() -> int:
    """How many of the test database's sessions wait for a lock (a `row_locked` row's)."""
    conn = await asyncpg.connect(TEST_DATABASE_URL)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = $1 AND wait_event_type = 'Lock'",
                TEST_DB,
            )
        )
    finally:
        await conn.close()


async def timeline_ids(state: Any, user_id: int) -> list[int]:
    """The post ids in a user's Redis home timeline, newest first."""
    return [pid for pid, _ in await state.timelines.latest(user_id, 1000)]


def metric_value(text: str, sample: str, default: float | None = None) -> float:
    """The value of one sample (`name` or `name{labels}`) in Prometheus text; `default` when
    it is absent, else an AssertionError."""
    found = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.M)
    if found:
        return float(found.group(1))
    assert default is not None, f"{sample} not exported"
    return default


def post_id_at(ms: int, seq: int = 0) -> int:
    """The id Postgres would give the `seq`-th post of millisecond `ms` (app.posts.ids)."""
    return ((ms - EPOCH_MS) << SEQUENCE_BITS) | seq


class MonotonicClock:
    """Stands in for the `time` module of code that reads `time.monotonic()`:
    `monkeypatch.setattr(module, "time", clock)`, then `clock.now += seconds`."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


# -- waiting ---------------------------------------------------------------------------------


async def eventually(
    check: Callable[[], T | Awaitable[T]],
    within: float = 10.0,
    interval: float = 0.02,
    what: str = "condition",
) -> T:
    """Poll `check` (plain or async) until it returns something truthy, and return that.

    For waits on work that runs elsewhere (a worker, a background task, another process):
    it returns as soon as the condition holds and fails, naming `what`, after `within` s.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() >= deadline:
            raise AssertionError(f"{what}: not met within {within} s")
        await asyncio.sleep(interval)


# -- comments, follower lists (issue 14) -----------------------------------------------------


async def add_comment(client: httpx.AsyncClient, token: str, post_id: int, body: str) -> str:
    """addComment; the new comment's id."""
    data = await gql(client, "AddComment", {"postId": str(post_id), "body": body}, token=token)
    return str(data.ok()["addComment"]["id"])


async def connection_page(
    client: httpx.AsyncClient,
    operation: str,
    variables: dict[str, Any],
    path: Sequence[str],
    token: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One page of a connection `path` deep in an operation's data: (nodes, pageInfo)."""
    found: Any = (await gql(client, operation, variables, token=token)).ok()
    for key in path:
        found = found[key]
    return [edge["node"] for edge in found["edges"]], found["pageInfo"]


@asynccontextmanager
async def app_client(state: Any, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of an app built on `state` with some settings changed (a tight
    RATE_LIMIT_WRITES_PER_MINUTE, say)."""
    import dataclasses

    from app.web import create_app

    changed = dataclasses.replace(state, settings=state.settings.model_copy(update=settings))
    transport = httpx.ASGITransport(app=create_app(changed))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


@asynccontextmanager
async def clients_at(
    state: Any, addresses: Sequence[str], **settings: Any
) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Like `app_client`, but one client per client address (what per-address budgets
    count), in order, all calling one app."""
    import dataclasses
    from contextlib import AsyncExitStack

    from app.web import create_app

    changed = dataclasses.replace(state, settings=state.settings.model_copy(update=settings))
    app = create_app(changed)
    async with AsyncExitStack() as stack:
        clients = []
        for address in addresses:
            transport = httpx.ASGITransport(app=app, client=(address, 40000))
            client = httpx.AsyncClient(transport=transport, base_url="http://testserver")
            clients.append(await stack.enter_async_context(client))
        yield clients


# -- many examples in one test (tests/reliability) -------------------------------------------


async def reset_stores(state: Any) -> None:
    """What the autouse `clean` fixture does before every test, for tests that run many
    independent examples (hypothesis) within one: empty tables and Redis db, local caches."""
    import shutil

    from tests.conftest import MEDIA_DIR, TABLES

    async with db() as conn:
        await conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    await state.redis.flushdb()
    shutil.rmtree(MEDIA_DIR, ignore_errors=True)
    state.forget_local()


async def quick_users(state: Any, handles: Sequence[str]) -> list[tuple[str, int]]:
    """Active users made in one INSERT, with tokens; (token, id) each. For tests that need
    fresh users per example: signUp's Argon2 hash costs ~0.1 s of CPU each. They cannot log
    in (no password); everything else goes through the API as usual."""
    from app.auth.tokens import issue_token

    rows = await sql(
        "INSERT INTO users (handle, password_hash, display_name, last_active_at)"
        " SELECT h, '!', h, now() FROM unnest($1::text[]) h RETURNING id, handle",
        list(handles),
    )
    ids = {r["handle"]: int(r["id"]) for r in rows}
    return [(issue_token(state.settings, ids[h]), ids[h]) for h in handles]


async def full_scroll(
    client: httpx.AsyncClient, token: str, mode: str = "RANKED", first: int = 20, pages: int = 100
) -> list[int]:
    """Every post id of a home feed, page after page from the top until hasNextPage is false."""
    shown: list[int] = []
    after: str | None = None
    for _ in range(pages):
        variables: dict[str, Any] = {"first": first, "mode": mode, "after": after}
        feed = (await gql(client, "Feed", variables, token=token)).ok()["feed"]
        shown += [int(edge["node"]["id"]) for edge in feed["edges"]]
        if not feed["pageInfo"]["hasNextPage"]:
            return shown
        after = feed["pageInfo"]["endCursor"]
    raise AssertionError(f"the feed did not end within {pages} pages")


# A well-formed keyset cursor (app.posts.keyset) whose id no BIGINT row can have.
FORGED_CURSOR = keyset.encode(datetime(2026, 1, 1, tzinfo=UTC), 10**20)


async def followed_pair(
    client: httpx.AsyncClient, pipeline: Any, posts_each: int = 8
) -> tuple[str, int, dict[str, str], dict[str, list[int]]]:
    """A viewer following ann and ben, who posted `posts_each` each (fanned out): the
    viewer's token and id, the authors' tokens, and each author's post ids, oldest first."""
    viewer, viewer_id = await make_user(client, "viewer")
    authors = {h: (await make_user(client, h))[0] for h in ("ann", "ben")}
    for handle in authors:
        await follow(client, viewer, handle)
    await pipeline.settle()
    made = {
        h: [await post(client, t, f"{h} {i}") for i in range(posts_each)]
        for h, t in authors.items()
    }
    await pipeline.settle()
    return viewer, viewer_id, authors, made


# -- command lines and statements ----------------------------------------------------------


async def run_module(
    *argv: str, env: dict[str, str] | None = None, seconds: float = 60
) -> tuple[int, str, str]:
    """`python -m <argv>` in the project's root, to the end (at most `seconds`), with the
    test session's environment plus `env`: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", *argv, cwd=PROJECT_ROOT, env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), seconds)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def cli(*argv: str, env: dict[str, str] | None = None) -> str:
    """`run_module` that must succeed: its stdout."""
    code, out, err = await run_module(*argv, env=env)
    assert code == 0, err
    return out


@contextmanager
def counting_statements(state: Any) -> Iterator[list[str]]:
    """The SQL statements the app's engine sends inside the block, in order."""
    from sqlalchemy import event

    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    engine = state.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


def readme_bulk_seed_command() -> list[str]:
    """The README's bulk-seed command, as argv (the docs test checks its shape, the seed test
    runs it)."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    lines = [
        line
        for block in re.findall(r"```sh\n(.*?)```", readme, re.S)
        for line in block.splitlines()
        if "-m devtools.seed bulk" in line
    ]
    assert len(lines) == 1, lines
    return shlex.split(lines[0], comments=True)
