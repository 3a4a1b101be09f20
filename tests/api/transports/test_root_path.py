"""Behind a path prefix (`uvicorn --root-path /api`) every input bound still holds (issue 33).

uvicorn puts the root path in front of `scope["path"]` (`/api/graphql`) and the router takes
it off again; admission compared the raw path with `/graphql`, so under a root path GraphQL
requests were served with no body size or time limit, no 414 and no admission slot. Against
a real uvicorn process, as a reverse proxy that strips `/api` would call it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable

import httpx
import pytest

from tests.helpers import eventually, log_in_request, make_user, row_locked, waiting_on_locks
from tests.realtime.live import LiveClient
from tests.servers import ApiServer

MAX_BYTES = 4096
BODY_TIMEOUT = 1.0
QUERY = '{ user(handle: "nobody") { handle } }'


@pytest.fixture(scope="module")
async def api(test_database: str) -> AsyncIterator[ApiServer]:
    env = {
        "MAX_REQUEST_BYTES": str(MAX_BYTES),
        "REQUEST_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
        "MAX_IN_FLIGHT": "1",
        "ADMISSION_WAIT_MS": "0",
    }
    async with ApiServer(env=env, args=["--root-path", "/api"]) as server:
        yield server


def refused(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert response.headers["connection"] == "close"


async def test_graphql_is_served_under_the_root_path(api: ApiServer) -> None:
    async with api.http() as http:
        response = await http.post("/graphql", json={"query": QUERY})
        assert response.json() == {"data": {"user": None}}
        response = await http.get("/graphql", params={"query": QUERY})
        assert response.json() == {"data": {"user": None}}


async def test_a_long_query_string_is_refused_414(api: ApiServer) -> None:
    padding = " " * MAX_BYTES
    async with api.http() as http:
        refused(await http.get("/graphql", params={"query": QUERY + padding}), 414)


async def test_a_big_body_is_refused_413(api: ApiServer) -> None:
    body = {"query": QUERY, "variables": {"pad": "x" * MAX_BYTES}}
    async with api.http() as http:
        refused(await http.post("/graphql", json=body), 413)


async def test_a_slow_body_is_refused_408(api: ApiServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
    try:
        writer.write(
            b"POST /graphql HTTP/1.1\r\nhost: api\r\ncontent-type: application/json\r\n"
            b"content-length: 100\r\n\r\n{"  # one byte of the body, then nothing
        )
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), BODY_TIMEOUT + 5)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"BAD_USER_INPUT" in answer


async def test_requests_and_socket_operations_take_admission_slots(api: ApiServer) -> None:
    async with api.http() as http, httpx.AsyncClient(base_url=api.url, timeout=30) as other:
        token, user_id = await make_user(http, "slow")
        async with row_locked(user_id):
            slow = asyncio.create_task(log_in_request(other, "slow"))  # holds the one slot
            await eventually(lambda: _equals(waiting_on_locks(), 1), what="a logIn in flight")
            response = await http.post("/graphql", json={"query": QUERY})
            assert response.status_code == 503, response.text
            assert response.json()["errors"][0]["extensions"]["code"] == "OVERLOADED"
            # The websocket under the root path: its operations take the same slots.
            live = await LiveClient.open(api, token, subscribe=False)
            await live.subscribe()
            message = json.loads(await asyncio.wait_for(live.ws.recv(), 5.0))
            assert message["type"] == "error", message
            assert message["payload"][0]["extensions"]["code"] == "OVERLOADED", message
            await live.close()
        assert (await slow).status_code == 200


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return (await value) == expected
