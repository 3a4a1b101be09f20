"""One rule for "the client's address" in every per-address budget (issue 33): IPv4 exact,
IPv6 by its /64 (CLIENT_IPV6_PREFIX), IPv4-mapped IPv6 as its IPv4 address
(app.client_address).

Against a real uvicorn process: loopback holds one IPv6 address only, so the clients name
theirs the way a reverse proxy does, in X-Forwarded-For, which uvicorn takes from its
trusted proxies (127.0.0.1 and ::1 by default) as the client's address. Before the rule,
each address of a /64 was a budget of its own: a host walked around every one of them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import ValidationError
from websockets.asyncio.client import ClientConnection, connect

from app.client_address import budget_address
from app.config import Settings
from tests.helpers import PASSWORD, gql
from tests.realtime.live import PROTOCOL, closed_with, receive, send
from tests.servers import ApiServer

SIGNUPS_PER_HOUR = 2
READS_PER_MINUTE = 3
SOCKETS = 2
HOST = "2001:db8:0:1::1"  # one host's /64: 2001:db8:0:1::/64
SAME_HOST = ["2001:db8:0:1::2", "2001:db8:0:1:ffff:ffff:ffff:ffff", "2001:db8:0:1:a:b:c:d"]
NEIGHBOUR = "2001:db8:0:2::1"  # the next /64: another host
READ = {"query": '{ user(handle: "nobody") { handle } }'}


@pytest.fixture(scope="module")
async def api(test_database: str) -> AsyncIterator[ApiServer]:
    env = {
        "RATE_LIMIT_SIGNUPS_PER_IP_PER_HOUR": str(SIGNUPS_PER_HOUR),
        "RATE_LIMIT_READS_PER_IP_PER_MINUTE": str(READS_PER_MINUTE),
        "REALTIME_SOCKETS_PER_IP": str(SOCKETS),
    }
    async with ApiServer(env=env) as server:
        yield server


def at(address: str) -> dict[str, str]:
    return {"x-forwarded-for": address}


async def sign_up(api: ApiServer, handle: str, address: str) -> list[str]:
    """signUp from `address`: its error codes (none when it succeeded)."""
    async with api.http() as http:
        http.headers.update(at(address))
        result = await gql(http, "SignUp", {"handle": handle, "password": PASSWORD})
    assert result.status == 200
    return result.codes


async def read(api: ApiServer, address: str) -> list[str]:
    async with api.http() as http:
        response = await http.post("/graphql", json=READ, headers=at(address))
    assert response.status_code == 200, response.text
    return [e["extensions"]["code"] for e in response.json().get("errors", [])]


async def test_sign_ups_count_one_budget_per_ipv6_64(api: ApiServer) -> None:
    assert await sign_up(api, "first", HOST) == []
    assert await sign_up(api, "second", SAME_HOST[0]) == []
    # A third address of the same host is the same budget: 2 per hour, spent.
    assert await sign_up(api, "third", SAME_HOST[1]) == ["RATE_LIMITED"]
    assert await sign_up(api, "fourth", SAME_HOST[2]) == ["RATE_LIMITED"]
    assert await sign_up(api, "neighbour", NEIGHBOUR) == []  # another /64: its own budget


async def test_reads_count_one_budget_per_ipv6_64(api: ApiServer) -> None:
    for address in [HOST, *SAME_HOST[:2]]:
        assert await read(api, address) == []
    assert await read(api, SAME_HOST[2]) == ["RATE_LIMITED"]
    assert await read(api, NEIGHBOUR) == []


async def test_an_ipv4_mapped_address_is_its_ipv4_budget(api: ApiServer) -> None:
    """What a dual-stack listener sees of an IPv4 client counts with that client."""
    assert await read(api, "198.51.100.7") == []
    assert await read(api, "::ffff:198.51.100.7") == []
    assert await read(api, "198.51.100.7") == []
    assert await read(api, "::ffff:198.51.100.7") == ["RATE_LIMITED"]
    assert await read(api, "198.51.100.8") == []  # IPv4 stays exact


async def open_at(api: ApiServer, address: str) -> ClientConnection:
    return await connect(api.ws_url, subprotocols=[PROTOCOL], additional_headers=at(address))  # type: ignore[list-item]


async def test_sockets_count_one_budget_per_ipv6_64(api: ApiServer) -> None:
    held = [await open_at(api, HOST), await open_at(api, SAME_HOST[0])]
    for ws in held:  # open (the init timeout is 10 s)
        await send(ws, {"type": "ping"})
        assert (await receive(ws))["type"] == "pong"
    code, reason = await closed_with(await open_at(api, SAME_HOST[1]))
    assert code == 4429 and f"at most {SOCKETS}" in reason and "per address" in reason
    neighbour = await open_at(api, NEIGHBOUR)
    await send(neighbour, {"type": "ping"})
    assert (await receive(neighbour))["type"] == "pong"
    for ws in [*held, neighbour]:
        await ws.close()


# -- the rule alone ---------------------------------------------------------------------------


def test_the_rule() -> None:
    assert budget_address("203.0.113.9") == "203.0.113.9"
    assert budget_address("::ffff:203.0.113.9") == "203.0.113.9"
    assert budget_address("2001:db8:0:1:2:3:4:5") == "2001:db8:0:1::/64"
    assert budget_address("2001:DB8:0:1::9") == "2001:db8:0:1::/64"
    assert budget_address("fe80::1%eth0") == "fe80::/64"  # the zone names a link, not a host
    assert budget_address("2001:db8:0:1:2:3:4:5", 48) == "2001:db8::/48"
    assert budget_address("2001:db8::5", 128) == "2001:db8::5/128"
    assert budget_address("unknown") == "unknown"
    assert budget_address("x" * 500) == "x" * 64
    for host in ("203.0.113.9", "2001:db8:0:1:2:3:4:5", "::ffff:1.2.3.4"):  # keys are fixed
        key = budget_address(host)
        assert budget_address(key) == key and budget_address(key, 128) == key


def test_the_prefix_setting_is_bounded() -> None:
    assert Settings().client_ipv6_prefix == 64
    assert Settings(client_ipv6_prefix=56).client_ipv6_prefix == 56
    for wrong in (0, 31, 129):
        with pytest.raises(ValidationError):
            Settings(client_ipv6_prefix=wrong)
