"""changePassword outdates every older token, logOut revokes the one it is sent with, and
open websockets follow within TOKEN_RECHECK_SECONDS (decision 0013), all through GraphQL."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from app.auth.revocation import revoked_key, version_key
from app.auth.tokens import token_claims
from tests.auth.sessions import (
    NEW_PASSWORD,
    change_password,
    initialised_socket,
    live_socket,
    log_in,
    viewer_codes,
)
from tests.helpers import PASSWORD, app_client, eventually, gql, make_user
from tests.realtime.live import closed_with
from tests.servers import ApiServer


async def test_change_password_revokes_every_older_token(client: httpx.AsyncClient) -> None:
    phone, _ = await make_user(client, "ada")
    laptop = await log_in(client, "ada")
    assert await viewer_codes(client, phone) == [] and await viewer_codes(client, laptop) == []

    data = (await change_password(client, phone)).ok()["changePassword"]
    fresh = str(data["token"])
    assert data["user"]["handle"] == "ada"

    assert await viewer_codes(client, phone) == ["UNAUTHENTICATED"]
    assert await viewer_codes(client, laptop) == ["UNAUTHENTICATED"]
    assert await viewer_codes(client, fresh) == []
    # Writes too, not only reads.
    refused = await gql(client, "CreatePost", {"body": "still me?"}, token=laptop)
    assert refused.codes == ["UNAUTHENTICATED"]
    # The old password is gone, the new one logs in, and that token works.
    wrong = await gql(client, "LogIn", {"handle": "ada", "password": PASSWORD})
    assert wrong.codes == ["UNAUTHENTICATED"]
    assert await viewer_codes(client, await log_in(client, "ada", NEW_PASSWORD)) == []


async def test_revocation_survives_a_lost_version_cache(client: httpx.AsyncClient, state) -> None:
    old, user_id = await make_user(client, "bea")
    (await change_password(client, old)).ok()
    await state.redis.delete(version_key(user_id))  # Redis restarted empty, or the TTL lapsed
    assert await viewer_codes(client, old) == ["UNAUTHENTICATED"]
    assert await state.redis.get(version_key(user_id)) == b"1"  # refilled from PostgreSQL


async def test_change_password_checks_both_passwords(client: httpx.AsyncClient) -> None:
    token, _ = await make_user(client, "cid")
    assert (await change_password(client, token, old="not-my-password")).codes == ["FORBIDDEN"]
    assert (await change_password(client, token, new="short")).codes == ["BAD_USER_INPUT"]
    assert (await change_password(client, "")).codes == ["UNAUTHENTICATED"]
    # Nothing changed: the token still works, the old password still logs in.
    assert await viewer_codes(client, token) == []
    assert await viewer_codes(client, await log_in(client, "cid")) == []


async def test_log_out_revokes_only_the_token_it_is_sent_with(client: httpx.AsyncClient) -> None:
    phone, _ = await make_user(client, "dan")
    laptop = await log_in(client, "dan")
    assert (await gql(client, "LogOut", token=phone)).ok() == {"logOut": True}
    assert await viewer_codes(client, phone) == ["UNAUTHENTICATED"]
    assert await viewer_codes(client, laptop) == []  # the other device stays logged in
    assert (await gql(client, "LogOut", token=phone)).codes == ["UNAUTHENTICATED"]
    assert (await gql(client, "LogOut")).codes == ["UNAUTHENTICATED"]


async def test_another_process_revocation_holds_within_the_check_cache(
    client: httpx.AsyncClient, state
) -> None:
    """A token that passed is trusted TOKEN_CHECK_CACHE_SECONDS in this process; a logOut run by
    another process (its deny-list entry written, nothing forgotten here) holds after that,
    and with the cache off at once."""
    token, _ = await make_user(client, "eli")
    claims = token_claims(state.settings, token)
    async with app_client(state, token_check_cache_seconds=0.3) as cached:
        assert await viewer_codes(cached, token) == []
        await state.redis.set(revoked_key(claims.user_id, claims.token_id), b"1", ex=60)
        assert await viewer_codes(cached, token) == []  # trusted a little longer

        async def refused() -> bool:
            return await viewer_codes(cached, token) == ["UNAUTHENTICATED"]

        await eventually(refused, within=3, interval=0.05, what="the cached check expired")
    other, _ = await make_user(client, "fay")
    claims = token_claims(state.settings, other)
    async with app_client(state, token_check_cache_seconds=0) as uncached:
        assert await viewer_codes(uncached, other) == []
        await state.redis.set(revoked_key(claims.user_id, claims.token_id), b"1", ex=60)
        assert await viewer_codes(uncached, other) == ["UNAUTHENTICATED"]


# -- websockets: refused on connect, closed 4403 within TOKEN_RECHECK_SECONDS --------------

RECHECK_SECONDS = 0.3


async def test_revoked_tokens_close_their_sockets_and_open_none(test_database: str) -> None:
    env = {"TOKEN_RECHECK_SECONDS": str(RECHECK_SECONDS)}
    async with ApiServer(env=env) as api, api.http() as http:
        phone, _ = await make_user(http, "eve")
        laptop = await log_in(http, "eve")
        tablet = await log_in(http, "eve")
        sockets = {t: await live_socket(api, t) for t in (phone, laptop, tablet)}

        # logOut: that token's socket closes, the other devices' sockets stay open.
        (await gql(http, "LogOut", token=phone)).ok()
        code, reason = await closed_with(sockets[phone], RECHECK_SECONDS * 10)
        assert code == 4403 and "revoked" in reason, (code, reason)
        # The other sockets live on through several more rechecks: no frame, no close.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(sockets[laptop].recv(), RECHECK_SECONDS * 4)
        for token in (laptop, tablet):
            assert sockets[token].close_code is None
        refused = await initialised_socket(api, phone)
        code, reason = await closed_with(refused, 5)
        assert code == 4403 and "logged out" in reason, reason

        # changePassword (from the laptop): every older socket closes, the laptop's too.
        fresh = (await change_password(http, laptop)).ok()["changePassword"]["token"]
        for token in (laptop, tablet):
            code, reason = await closed_with(sockets[token], RECHECK_SECONDS * 10)
            assert code == 4403 and "revoked" in reason, (code, reason)
        code, reason = await closed_with(await initialised_socket(api, tablet), 5)
        assert code == 4403 and "password was changed" in reason, reason
        ws = await live_socket(api, fresh)
        await ws.close()
