"""A logged-out token stays logged out when the Redis role holding revocations loses its
data (a failover to an empty replica, a restart without persistence): the revocation is
recorded in PostgreSQL and read back whenever Redis cannot vouch for a token (issue 33,
docs/decisions/0066-durable-revocation.md)."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from redis.asyncio import Redis

from app.auth import revocation
from app.auth.revocation import revoked_key, version_key
from app.auth.tokens import token_claims
from app.state import AppState
from app.web import create_app
from tests.auth.sessions import (
    change_password,
    initialised_socket,
    live_socket,
    log_in,
    viewer_codes,
)
from tests.helpers import counting_statements, eventually, gql, make_user, sql
from tests.realtime.live import closed_with
from tests.servers import ApiServer, free_port, redis_answers, redis_server


async def lose_redis(state: AppState) -> None:
    """The limits role comes back empty; no process remembers a recent pass either."""
    await state.roles.limits.flushdb()
    revocation.passed.clear()


async def test_a_logged_out_token_stays_out_after_redis_lost_its_data(
    client: httpx.AsyncClient, state: AppState
) -> None:
    phone, _ = await make_user(client, "ada")
    laptop = await log_in(client, "ada")
    assert await viewer_codes(client, phone) == []
    (await gql(client, "LogOut", token=phone)).ok()
    await lose_redis(state)
    assert await viewer_codes(client, phone) == ["UNAUTHENTICATED"]
    assert (await gql(client, "CreatePost", {"body": "me?"}, token=phone)).codes == [
        "UNAUTHENTICATED"
    ]
    assert await viewer_codes(client, laptop) == []  # the other device stays logged in
    # Once read back, a normal request needs no PostgreSQL: Redis vouches again.
    await lose_redis(state)
    assert await viewer_codes(client, phone) == ["UNAUTHENTICATED"]
    assert await viewer_codes(client, laptop) == []


async def test_a_normal_request_reads_no_revocation_from_postgresql(
    client: httpx.AsyncClient, state: AppState
) -> None:
    """A token is vouched for when issued: its requests read nothing from revoked_tokens;
    after Redis lost its data, its first request reads it once and writes the answer back."""
    token, _ = await make_user(client, "fay")
    assert await viewer_codes(client, token) == []  # (the user's version is cached now)
    revocation.passed.clear()
    with counting_statements(state) as seen:
        assert await viewer_codes(client, token) == []
    assert not [q for q in seen if "revoked_tokens" in q]
    await lose_redis(state)
    with counting_statements(state) as seen:
        assert await viewer_codes(client, token) == []
        revocation.passed.clear()
        assert await viewer_codes(client, token) == []
    assert len([q for q in seen if "revoked_tokens" in q]) == 1


async def test_a_password_change_holds_after_redis_lost_its_data(
    client: httpx.AsyncClient, state: AppState
) -> None:
    old, _ = await make_user(client, "bea")
    fresh = (await change_password(client, old)).ok()["changePassword"]["token"]
    await lose_redis(state)
    assert await viewer_codes(client, old) == ["UNAUTHENTICATED"]
    assert await viewer_codes(client, fresh) == []


async def test_revocations_are_recorded_and_pruned_after_expiry(
    client: httpx.AsyncClient, state: AppState
) -> None:
    token, user_id = await make_user(client, "cid")
    claims = token_claims(state.settings, token)
    await sql(
        "INSERT INTO revoked_tokens (token_id, user_id, expires_at)"
        " VALUES ('lapsed', $1, now() - interval '1 minute')",
        user_id,
    )
    (await gql(client, "LogOut", token=token)).ok()
    rows = await sql("SELECT token_id, user_id, expires_at FROM revoked_tokens")
    assert [(r["token_id"], r["user_id"]) for r in rows] == [(claims.token_id, user_id)]
    assert int(rows[0]["expires_at"].timestamp()) == claims.expires_at


@asynccontextmanager
async def without_limits_redis(
    state: AppState, url: str = "redis://127.0.0.1:1/0"
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app whose limits role (revocations, budgets) cannot be reached (by
    default a port where nothing listens)."""
    dead = Redis.from_url(url)
    roles = dataclasses.replace(state.roles, limits=dead)
    app = create_app(dataclasses.replace(state, roles=roles))
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver"
        ) as c:
            yield c
    finally:
        await dead.aclose()


async def test_log_out_holds_while_redis_is_unreachable(
    client: httpx.AsyncClient, state: AppState
) -> None:
    """A logOut sent while Redis is down is recorded (PostgreSQL), and a token logged out
    before Redis went down is refused meanwhile: the deny-list is no longer Redis only."""
    early, _ = await make_user(client, "dee")
    late = await log_in(client, "dee")
    other = await log_in(client, "dee")
    (await gql(client, "LogOut", token=early)).ok()
    async with without_limits_redis(state) as down:
        assert await viewer_codes(down, early) == ["UNAUTHENTICATED"]
        assert (await gql(down, "LogOut", token=late)).ok() == {"logOut": True}
        assert await viewer_codes(down, late) == ["UNAUTHENTICATED"]
        assert await viewer_codes(down, other) == []
        # Its Redis mark waits for Redis to come back (this client never will).
        assert revocation.retries.pending() == 1
    revocation.retries.clear()


async def test_a_websocket_refuses_a_logged_out_token_after_redis_lost_its_data(
    test_database: str, state: AppState
) -> None:
    async with ApiServer() as api, api.http() as http:
        phone, _ = await make_user(http, "eve")
        laptop = await log_in(http, "eve")
        (await gql(http, "LogOut", token=phone)).ok()
        await state.roles.limits.flushdb()
        code, reason = await closed_with(await initialised_socket(api, phone), 5)
        assert code == 4403 and "logged out" in reason, (code, reason)
        assert await viewer_codes(http, phone) == ["UNAUTHENTICATED"]
        ws = await live_socket(api, laptop)  # the other device's socket opens
        await ws.close()


async def test_revocations_redis_missed_are_written_once_it_is_back(
    client: httpx.AsyncClient, state: AppState
) -> None:
    """A logOut and a changePassword made while the limits role is down reach it once it
    answers again (retried in the background): it does not keep an older answer."""
    port = free_port()
    token, user_id = await make_user(client, "gus")
    other = await log_in(client, "gus")
    claims = token_claims(state.settings, token)
    async with without_limits_redis(state, f"redis://127.0.0.1:{port}/0") as down:
        (await gql(down, "LogOut", token=token)).ok()
        (await change_password(down, other)).ok()
        assert revocation.retries.pending() == 2
        with tempfile.TemporaryDirectory() as folder, redis_server(port, Path(folder)):
            await eventually(lambda: redis_answers(port), within=15, what="redis-server")
            back = Redis(port=port)
            try:

                async def written() -> bool:
                    mark = await back.get(revoked_key(user_id, claims.token_id))
                    return mark == b"1" and await back.get(version_key(user_id)) == b"1"

                await eventually(written, within=5, interval=0.1, what="the retried writes")
                assert revocation.retries.pending() == 0
            finally:
                await back.aclose()
