"""Sessions as the revocation tests use them (tests/auth/test_auth_revocation.py,
test_durable_revocation.py): log in for a token, change the password, ask whether a token is
honoured (`viewer_codes`), and open sockets carrying a token (`initialised_socket`, `live_socket`).
"""

from __future__ import annotations

from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection

from tests.helpers import PASSWORD, gql
from tests.realtime.live import FEED_UPDATES, authed, open_socket, receive, send
from tests.servers import ApiServer

NEW_PASSWORD = "a-new-password-456"


async def log_in(client: httpx.AsyncClient, handle: str, password: str = PASSWORD) -> str:
    """A new token of `handle`'s, through the LogIn operation."""
    data = (await gql(client, "LogIn", {"handle": handle, "password": password})).ok()
    return str(data["logIn"]["token"])


async def viewer_codes(client: httpx.AsyncClient, token: str) -> list[str]:
    """[] when `token` is honoured, the error codes otherwise."""
    result = await gql(client, "Viewer", token=token)
    if not result.errors:
        assert result.data and result.data["viewer"] is not None
    return result.codes


async def change_password(
    client: httpx.AsyncClient, token: str, old: str = PASSWORD, new: str = NEW_PASSWORD
) -> Any:
    """ChangePassword from `old` to `new` (its result, unchecked)."""
    variables = {"oldPassword": old, "newPassword": new}
    return await gql(client, "ChangePassword", variables, token=token)


async def initialised_socket(api: ApiServer, token: str) -> ClientConnection:
    """A socket whose connection_init carries `token` (its answer not read)."""
    ws = await open_socket(api)
    await send(ws, {"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
    return ws


async def live_socket(api: ApiServer, token: str) -> ClientConnection:
    """An authed socket with a live feed subscription, its first frame read."""
    ws = await authed(api, token)
    await send(ws, {"id": "1", "type": "subscribe", "payload": {"query": FEED_UPDATES}})
    assert (await receive(ws))["type"] == "next"
    return ws
