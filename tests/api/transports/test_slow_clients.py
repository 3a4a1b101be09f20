"""Slow and greedy clients against a real uvicorn process, started as `make run` starts it
(devtools.launcher's API command line): stalled uploads, headers sent a byte at a time, and
one address opening more connections than its share.

Loopback has a whole /8: the attacker's sockets come from 127.0.0.2, the bystander from
127.0.0.1, so the per-address cap tells them apart as it would two hosts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from devtools.launcher import PROCESSES
from tests.helpers import eventually
from tests.servers import ApiServer

ATTACKER = "127.0.0.2"
BYSTANDER = "127.0.0.1"
STALLED = 40
BODY_TIMEOUT = 2.0
HEADER_TIMEOUT = 2.0
PER_ADDRESS = 8
SMALL_QUERY = {"query": '{ user(handle: "nobody") { handle } }'}


def launcher_args() -> list[str]:
    """The API's uvicorn options as `make run` passes them (after `app.web:app`)."""
    (api,) = [spec for spec in PROCESSES if spec.name == "api"]
    argv = api.command(0)
    rest = argv[argv.index("app.web:app") + 1 :]
    options: list[str] = []
    skip = {"--host", "--port"}  # ApiServer picks its own
    i = 0
    while i < len(rest):
        if rest[i] in skip:
            i += 2
            continue
        options.append(rest[i])
        i += 1
    return options


@pytest.fixture(scope="module")
async def api(test_database: str) -> AsyncIterator[ApiServer]:
    env = {
        "REQUEST_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
        "REQUEST_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
        "MAX_CONNECTIONS_PER_CLIENT": str(PER_ADDRESS),
    }
    async with ApiServer(env=env, args=launcher_args()) as server:
        yield server


@asynccontextmanager
async def raw_connections(
    server: ApiServer, count: int, source: str = ATTACKER
) -> AsyncIterator[list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]:
    opened = []
    try:
        for _ in range(count):
            opened.append(
                await asyncio.open_connection(
                    "127.0.0.1", server.port, local_addr=(source, 0), limit=1 << 20
                )
            )
        yield opened
    finally:
        for _, writer in opened:
            writer.close()


def stalled_upload_head(declared: int = 999) -> bytes:
    return (
        b"POST /graphql HTTP/1.1\r\nhost: api\r\ncontent-type: application/json\r\n"
        + f"content-length: {declared}\r\n\r\n".encode()
        + b"{"  # one byte of the body, then nothing
    )


def bystander(server: ApiServer) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=BYSTANDER)
    return httpx.AsyncClient(base_url=server.url, timeout=30, transport=transport)


async def read_response(reader: asyncio.StreamReader, within: float) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), within)


def parse_status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer
    return int(answer.split(b" ", 2)[1])


def json_body(answer: bytes) -> dict:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


async def test_stalled_uploads_leave_the_api_to_other_clients(api: ApiServer) -> None:
    async with raw_connections(api, STALLED) as sockets:
        for _, writer in sockets:
            writer.write(stalled_upload_head())
        await asyncio.gather(*(writer.drain() for _, writer in sockets))
        async with bystander(api) as http:
            start = time.perf_counter()
            response = await http.post("/graphql", json=SMALL_QUERY)
            seconds = time.perf_counter() - start
        assert response.status_code == 200, response.text
        assert response.json() == {"data": {"user": None}}
        assert seconds < 2.0, seconds
        start = time.perf_counter()
        answers = await asyncio.gather(
            *(read_response(reader, BODY_TIMEOUT + 5) for reader, _ in sockets)
        )
        assert time.perf_counter() - start < BODY_TIMEOUT + 3
    timed_out = [a for a in answers if parse_status(a) == 408]
    assert json_body(timed_out[0])["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    capped = [a for a in answers if parse_status(a) == 429]
    error = json_body(capped[0])["errors"][0]
    assert error["extensions"] == {"code": "RATE_LIMITED", "retryAfter": 1}
    assert b"\r\nretry-after: 1\r\n" in capped[0].lower()
    # The stalled uploads themselves: PER_ADDRESS of them hold a connection until the body
    # deadline (408), the rest are over the address's cap and answered at once (429).
    statuses = [parse_status(answer) for answer in answers]
    assert statuses.count(408) == PER_ADDRESS, statuses
    assert statuses.count(429) == STALLED - PER_ADDRESS, statuses


async def test_a_head_sent_a_byte_at_a_time_is_cut_off(api: ApiServer) -> None:
    head = b"GET /healthz HTTP/1.1\r\nhost: api\r\nx-padding: " + b"a" * 200 + b"\r\n\r\n"
    async with raw_connections(api, 2) as [(trickling, writer), (idle, _)]:
        start = time.perf_counter()
        closed_at = None
        for byte in head:
            if trickling.at_eof() or writer.is_closing():
                break
            try:
                writer.write(bytes([byte]))
                await writer.drain()
            except ConnectionError:
                break
            answer = await _read_for(trickling, 0.05)
            if answer:
                closed_at = time.perf_counter() - start
                break
        assert closed_at is not None, "the trickling head was never cut off"
        assert HEADER_TIMEOUT * 0.9 < closed_at < HEADER_TIMEOUT + 2, closed_at
        assert parse_status(answer) == 408
        # A connection that never sends anything is closed by the same deadline, silently.
        assert await read_response(idle, HEADER_TIMEOUT + 2) == b""


async def _read_for(reader: asyncio.StreamReader, seconds: float) -> bytes:
    try:
        return await asyncio.wait_for(reader.read(65536), seconds)
    except TimeoutError:
        return b""


async def test_one_address_gets_its_share_of_connections(api: ApiServer) -> None:
    request = b"GET /healthz HTTP/1.1\r\nhost: api\r\n\r\n"
    async with raw_connections(api, PER_ADDRESS) as held:
        async with raw_connections(api, 1) as [(reader, writer)]:
            writer.write(request)
            answer = await read_response(reader, 5)  # answered, then closed
        assert parse_status(answer) == 429
        assert json_body(answer)["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        async with bystander(api) as http:  # another address is not affected
            assert (await http.get("/healthz")).status_code == 200
        # The held connections still work.
        reader, writer = held[0]
        writer.write(request)
        assert parse_status(await reader.readuntil(b"\r\n\r\n")) == 200

    # Once they are closed the address may connect again.
    async def admitted() -> bool:
        async with raw_connections(api, 1) as [(reader, writer)]:
            writer.write(request)
            return parse_status(await reader.readuntil(b"\r\n\r\n")) == 200

    await eventually(admitted, what="a new connection admitted")


async def test_a_head_over_the_bound_is_refused(api: ApiServer) -> None:
    """httptools refuses a request line over 64 KiB itself (400) but buffers headers of any
    size: a 200 KB header used to be read whole and answered 200."""
    big = b"x-padding: " + b"a" * 200_000 + b"\r\n"
    async with raw_connections(api, 1) as [(reader, writer)]:
        writer.write(b"GET /healthz HTTP/1.1\r\nhost: api\r\n" + big + b"\r\n")
        with contextlib.suppress(ConnectionError):  # closed before all of it was read
            await writer.drain()
        answer = await read_response(reader, 5)
    assert parse_status(answer) == 431


async def test_compiled_answers_are_whole_http_responses(api: ApiServer) -> None:
    """The compiled path writes its response itself under uvicorn (app.api.upstream.uvicorn's
    write_response, decision 0063): pipelined requests on one kept-alive connection each get
    a whole response (status line, uvicorn's server and date headers, content-length, body),
    and `Connection: close` gets the header and the connection closed, as uvicorn's sends do."""
    async with bystander(api) as client:
        manifest = (await client.get("/graphql/documents.json")).json()
    body = json.dumps({"documentId": manifest["Feed"], "variables": {"first": 2}}).encode()

    def request(extra: bytes = b"") -> bytes:
        head = b"POST /graphql HTTP/1.1\r\nhost: api\r\ncontent-type: application/json\r\n"
        return head + b"content-length: %d\r\n%s\r\n" % (len(body), extra) + body

    reader, writer = await asyncio.open_connection("127.0.0.1", api.port, local_addr=(BYSTANDER, 0))
    try:
        writer.write(request() + request() + request(b"connection: close\r\n"))
        for last in (False, False, True):
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.lower().split(b"\r\n")
            assert lines[0] == b"http/1.1 200 ok", head
            assert any(line.startswith(b"server: ") for line in lines)
            assert any(line.startswith(b"date: ") for line in lines)
            assert (b"connection: close" in lines) is last
            (length,) = [int(line[16:]) for line in lines if line.startswith(b"content-length: ")]
            answer = json.loads(await asyncio.wait_for(reader.readexactly(length), 10))
            assert answer["data"] is None
            assert answer["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
        assert await read_response(reader, 5) == b""  # closed after the third
    finally:
        writer.close()
