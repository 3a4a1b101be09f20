"""Argon2 cannot be kept busy by one account or one address (issue 33): every hashing
mutation (signUp, logIn, changePassword) spends a per-account and a per-address hash budget,
a document may hold only HASHING_FIELDS_PER_DOCUMENT of them (refused before any hash), no
hash runs while a pooled connection sits in a transaction, and a full hash gate answers
OVERLOADED at once instead of holding the request's admission slot."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from app import passwords
from app.config import Settings
from app.passwords import PasswordGate
from app.state import AppState
from app.web import create_app
from tests.conftest import TEST_DB
from tests.helpers import PASSWORD, clients_at, db, gql, make_user

OWNER, OTHER = "10.1.0.1", "10.1.0.2"


def retry_after(result: Any) -> int:
    value = result.errors[0]["extensions"]["retryAfter"]
    assert isinstance(value, int)
    return value


async def change_password(client: httpx.AsyncClient, token: str, old: str, new: str) -> Any:
    return await gql(
        client, "ChangePassword", {"oldPassword": old, "newPassword": new}, token=token
    )


# -- per-account and per-address hash budgets -------------------------------------------------


async def test_a_change_password_loop_runs_out_of_hashes(state: AppState) -> None:
    """Each changePassword costs two hashes and returns the token for the next call: the
    account's hash budget ends the loop with RATE_LIMITED and retryAfter, before any hash."""
    async with clients_at(
        state,
        [OWNER, OTHER],
        rate_limit_hashes_per_account_per_minute=6,
        rate_limit_hashes_per_ip_per_minute=1000,
    ) as (c, d):
        token, _ = await make_user(c, "looper")  # 1 hash
        old = PASSWORD
        for i in range(2):  # 2 hashes each: 3, 5
            new = f"loop-password-{i}"
            data = (await change_password(c, token, old, new)).ok()
            token, old = data["changePassword"]["token"], new
        refused = await change_password(c, token, old, "loop-password-x")  # 7 > 6
        assert refused.codes == ["RATE_LIMITED"], refused.errors
        assert 1 <= retry_after(refused) <= 60
        # The account's budget, whatever the address: a logIn of it from elsewhere too.
        elsewhere = await gql(d, "LogIn", {"handle": "looper", "password": old})
        assert elsewhere.codes == ["RATE_LIMITED"]
        # Nothing changed: the refused call did not run.
        assert (await gql(c, "Viewer", token=token)).ok()["viewer"]["handle"] == "looper"


async def test_one_address_runs_out_of_hashes_across_accounts(state: AppState) -> None:
    """logIn of many accounts (unknown ones hash a dummy) and signUp from one address share
    the address's hash budget; another address keeps its own."""
    async with clients_at(
        state,
        [OWNER, OTHER],
        rate_limit_hashes_per_account_per_minute=1000,
        rate_limit_hashes_per_ip_per_minute=3,
    ) as (c, d):
        for i in range(3):
            wrong = {"handle": f"nobody{i}", "password": "guess-1234"}
            assert (await gql(c, "LogIn", wrong)).codes == ["UNAUTHENTICATED"]
        refused = await gql(c, "LogIn", {"handle": "nobody9", "password": "guess-1234"})
        assert refused.codes == ["RATE_LIMITED"]
        assert 1 <= retry_after(refused) <= 60
        signup = await gql(c, "SignUp", {"handle": "fresh", "password": PASSWORD})
        assert signup.codes == ["RATE_LIMITED"]
        await make_user(d, "fresh")  # another address


# -- hashing fields per document ---------------------------------------------------------------

ALIASED = """mutation {
  a: logIn(handle: "nobody1", password: "guess-1234") { token }
  b: logIn(handle: "nobody2", password: "guess-1234") { token }
}"""
SPREAD = """mutation { ...M signUp(handle: "newbie", password: "password123") { token } }
fragment M on Mutation { changePassword(oldPassword: "x", newPassword: "y") { token } }"""


async def test_a_document_may_hold_one_hashing_field(
    client: httpx.AsyncClient, hashes: list[float]
) -> None:
    for query in (ALIASED, SPREAD):
        refused = await gql(client, "", query=query)
        assert refused.data is None, refused
        assert refused.codes == ["BAD_USER_INPUT"], refused.errors
        extensions = refused.errors[0]["extensions"]
        assert extensions["limit"] == 1
        assert "password" in refused.errors[0]["message"]
    assert hashes == []  # refused before any hash ran
    one = await gql(client, "", query='mutation { logIn(handle: "x1y", password: "z") { token } }')
    assert one.codes == ["UNAUTHENTICATED"]


# -- no hash inside a transaction, no queueing inside an admission slot ----------------------


@pytest.fixture
def hashes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Every Argon2 call made meanwhile (its start time), each slowed to SLOW_HASH seconds."""
    started: list[float] = []
    real_hash, real_verify = passwords.hash_password, passwords.verify_password

    def slow_hash(password: str, *hasher: Any) -> str:
        started.append(time.monotonic())
        time.sleep(SLOW_HASH)
        return real_hash(password, *hasher)

    def slow_verify(password_hash: str, password: str) -> bool:
        started.append(time.monotonic())
        time.sleep(SLOW_HASH)
        return real_verify(password_hash, password)

    monkeypatch.setattr(passwords, "hash_password", slow_hash)
    monkeypatch.setattr(passwords, "verify_password", slow_verify)
    yield started


SLOW_HASH = 0.6


async def idle_in_transaction() -> int:
    async with db() as conn:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = $1 AND state LIKE 'idle in transaction%'",
                TEST_DB,
            )
        )


async def while_hashing(hashes: list[float], call: Any) -> int:
    """Run `call` and count, halfway through its first hash, the connections of the test
    database left idle in a transaction."""
    task = asyncio.ensure_future(call)
    for _ in range(200):
        if hashes:
            break
        await asyncio.sleep(0.01)
    assert hashes, "no hash started"
    await asyncio.sleep(SLOW_HASH / 2)
    seen = await idle_in_transaction()
    await task
    return seen


async def test_no_hash_runs_inside_a_transaction(
    client: httpx.AsyncClient, hashes: list[float]
) -> None:
    token, _ = await make_user(client, "held")
    hashes.clear()
    login = gql(client, "LogIn", {"handle": "held", "password": PASSWORD})
    assert await while_hashing(hashes, login) == 0
    hashes.clear()
    change = change_password(client, token, PASSWORD, "a-new-password-1")
    assert await while_hashing(hashes, change) == 0
    hashes.clear()
    signup = gql(client, "SignUp", {"handle": "another", "password": PASSWORD})
    assert await while_hashing(hashes, signup) == 0
    # And the password did change, once: the new one logs in, the old one not.
    assert (await gql(client, "LogIn", {"handle": "held", "password": PASSWORD})).codes == [
        "UNAUTHENTICATED"
    ]
    (await gql(client, "LogIn", {"handle": "held", "password": "a-new-password-1"})).ok()


@pytest.fixture
async def one_slot(state: AppState) -> AsyncIterator[httpx.AsyncClient]:
    """An app whose process has one Argon2 slot with the default wait (the test session's
    is longer: tests/conftest.py)."""
    gate = PasswordGate(1, Settings.model_fields["password_hash_wait_ms"].default)
    app = create_app(dataclasses.replace(state, passwords=gate))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


async def test_a_full_hash_gate_answers_overloaded_at_once(
    one_slot: httpx.AsyncClient, hashes: list[float]
) -> None:
    """While the one slot hashes (SLOW_HASH s), another logIn does not queue for it."""
    first = asyncio.ensure_future(
        gql(one_slot, "LogIn", {"handle": "nobody1", "password": "guess-1234"})
    )
    for _ in range(200):
        if hashes:
            break
        await asyncio.sleep(0.01)
    began = time.monotonic()
    second = await gql(one_slot, "LogIn", {"handle": "nobody2", "password": "guess-1234"})
    waited = time.monotonic() - began
    assert second.codes == ["OVERLOADED"], second.errors
    assert retry_after(second) >= 1
    assert waited < SLOW_HASH / 2, waited
    assert (await first).codes == ["UNAUTHENTICATED"]
