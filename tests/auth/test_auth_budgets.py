"""Budgets on the password mutations follow the right key (issue 19, decision 0020):
signUp per client address whatever token is sent, password guesses (logIn and
changePassword's old password) per (account, address) with a higher per-account ceiling and
growing delays, and changePassword's Argon2 work inside the process's hash slots."""

from __future__ import annotations

import asyncio
import time

import httpx

from app.auth.guesses import account_key
from app.state import AppState
from tests.helpers import PASSWORD, clients_at, gql, make_user, sign_up
from tests.servers import ApiServer

OWNER, STRANGER, OTHER, FOURTH = "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"
WRONG = {"handle": "victim", "password": "wrong-guess-1"}
RIGHT = {"handle": "victim", "password": PASSWORD}


def retry_after(result: object) -> int:
    value = result.errors[0]["extensions"]["retryAfter"]  # type: ignore[attr-defined]
    assert isinstance(value, int)
    return value


async def change_password(client: httpx.AsyncClient, token: str, old: str) -> list[str]:
    variables = {"oldPassword": old, "newPassword": "another-password-9"}
    return (await gql(client, "ChangePassword", variables, token=token)).codes


# -- signUp ----------------------------------------------------------------------------------


async def test_a_new_accounts_token_does_not_reset_the_sign_up_budget(state: AppState) -> None:
    async with clients_at(state, [OWNER, STRANGER], rate_limit_writes_per_minute=3) as (c, d):
        token = None
        for i in range(3):  # each sign-up sends the token the previous one returned
            data = await gql(c, "SignUp", {"handle": f"bot{i}", "password": PASSWORD}, token)
            token = data.ok()["signUp"]["token"]
        refused = await gql(c, "SignUp", {"handle": "bot3", "password": PASSWORD}, token)
        assert refused.codes == ["RATE_LIMITED"]
        assert 1 <= retry_after(refused) <= 60
        await sign_up(d, "elsewhere")  # another address has its own budget


async def test_accounts_per_address_have_an_hourly_ceiling(state: AppState) -> None:
    async with clients_at(state, [OWNER, STRANGER], rate_limit_signups_per_ip_per_hour=2) as (
        c,
        d,
    ):
        await sign_up(c, "first")
        await sign_up(c, "second")
        refused = await gql(c, "SignUp", {"handle": "third", "password": PASSWORD})
        assert refused.codes == ["RATE_LIMITED"]
        assert "hour" in refused.errors[0]["message"]
        assert 1 <= retry_after(refused) <= 3600
        await sign_up(d, "third")


# -- logIn -----------------------------------------------------------------------------------


async def test_a_strangers_failures_do_not_lock_the_owner_out(state: AppState) -> None:
    async with clients_at(state, [OWNER, STRANGER]) as (owner, stranger):
        await sign_up(owner, "victim")
        for _ in range(10):
            assert (await gql(stranger, "LogIn", WRONG)).codes == ["UNAUTHENTICATED"]
        refused = await gql(stranger, "LogIn", RIGHT)  # the 11th try: refused, unchecked
        assert refused.codes == ["RATE_LIMITED"]
        assert 60 < retry_after(refused) <= 900  # the (handle, address) window: 15 minutes
        (await gql(owner, "LogIn", RIGHT)).ok()


async def test_a_success_forgets_the_addresses_failures(state: AppState) -> None:
    async with clients_at(state, [OWNER], rate_limit_login_failures_per_handle_and_ip=3) as (c,):
        await sign_up(c, "victim")
        for _ in range(2):
            assert (await gql(c, "LogIn", WRONG)).codes == ["UNAUTHENTICATED"]
        (await gql(c, "LogIn", RIGHT)).ok()
        for _ in range(3):
            assert (await gql(c, "LogIn", WRONG)).codes == ["UNAUTHENTICATED"]
        assert (await gql(c, "LogIn", RIGHT)).codes == ["RATE_LIMITED"]


async def test_the_per_handle_ceiling_holds_across_addresses(state: AppState) -> None:
    settings = {
        "rate_limit_login_failures_per_handle_and_ip": 3,
        "rate_limit_login_failures_per_handle_per_hour": 5,
        "rate_limit_login_delay_after_failures": 5,
    }
    async with clients_at(state, [OWNER, STRANGER, OTHER, FOURTH], **settings) as clients:
        owner, stranger, other, fourth = clients
        await sign_up(owner, "victim")
        for client in (stranger, stranger, stranger, other, other):
            assert (await gql(client, "LogIn", WRONG)).codes == ["UNAUTHENTICATED"]
        # Five failures on the account from two addresses: a third address is refused,
        # the right password too, until the hour's window ends.
        refused = await gql(fourth, "LogIn", RIGHT)
        assert refused.codes == ["RATE_LIMITED"]
        assert 900 < retry_after(refused) <= 3600
        assert (await gql(other, "LogIn", WRONG)).codes == ["RATE_LIMITED"]
        # The owner's address (it signed up there) is known: not held by the ceiling.
        (await gql(owner, "LogIn", RIGHT)).ok()


async def test_per_handle_delays_grow_past_the_free_failures(state: AppState) -> None:
    settings = {
        "rate_limit_login_failures_per_handle_and_ip": 100,
        "rate_limit_login_delay_after_failures": 2,
        "rate_limit_login_delay_max_seconds": 60,
    }
    async with clients_at(state, [OWNER, STRANGER], **settings) as (owner, stranger):
        await sign_up(owner, "victim")
        waits = []
        for _ in range(2):
            assert (await gql(stranger, "LogIn", WRONG)).codes == ["UNAUTHENTICATED"]
        for _ in range(4):
            # The last failure "now": the wait is the whole delay, however long the failed
            # try's password hash took on a loaded machine.
            await state.redis.hset(account_key("victim"), "last", int(time.time() * 1000))
            refused = await gql(stranger, "LogIn", WRONG)
            assert refused.codes == ["RATE_LIMITED"]
            waits.append(retry_after(refused))
            # Let the delay pass: the last failure's time moved back (no sleeping).
            await state.redis.hset(account_key("victim"), "last", 0)
            assert (await gql(stranger, "LogIn", WRONG)).codes == ["UNAUTHENTICATED"]
        assert waits == [1, 2, 4, 8]
        (await gql(owner, "LogIn", RIGHT)).ok()  # the owner's known address waits for none


# -- changePassword --------------------------------------------------------------------------


async def test_change_password_guesses_are_budgeted(state: AppState) -> None:
    async with clients_at(
        state, [OWNER, STRANGER], rate_limit_login_failures_per_handle_and_ip=3
    ) as (owner, thief):
        stolen, _ = await make_user(owner, "victim")
        for i in range(3):
            assert await change_password(thief, stolen, f"guess-{i}-abc") == ["FORBIDDEN"]
        variables = {"oldPassword": PASSWORD, "newPassword": "another-password-9"}
        refused = await gql(thief, "ChangePassword", variables, token=stolen)
        assert refused.codes == ["RATE_LIMITED"]
        assert 60 < retry_after(refused) <= 900
        # One budget for guesses at this account from this address, whichever mutation.
        assert (await gql(thief, "LogIn", RIGHT)).codes == ["RATE_LIMITED"]
        # The owner, at their own address, still changes the password (ending the thief's
        # token).
        fresh = (await gql(owner, "ChangePassword", variables, token=stolen)).ok()
        assert fresh["changePassword"]["token"]


async def test_change_password_hashes_take_the_hash_slots() -> None:
    """One Argon2 slot and no wait: of simultaneous changePassword calls (each its own
    account, so no row lock serializes them) some answer OVERLOADED, none runs unbounded."""
    env = {"PASSWORD_HASH_CONCURRENCY": "1", "PASSWORD_HASH_WAIT_MS": "0"}
    async with ApiServer(env=env) as api, httpx.AsyncClient(base_url=api.url, timeout=30) as c:
        tokens = [await sign_up(c, f"user{i}") for i in range(6)]
        results = await asyncio.gather(*(change_password(c, t, "wrong-old-pw") for t in tokens))
        codes = [r[0] for r in results]
        assert "OVERLOADED" in codes and set(codes) <= {"FORBIDDEN", "OVERLOADED"}, codes
