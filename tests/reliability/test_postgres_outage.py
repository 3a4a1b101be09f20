"""PostgreSQL stopped for a while under an open feed session's reads and writes (issue 19): no
answer is INTERNAL. Freshness may degrade, authorization may not: the next pages of a session
the filter checked within FEED_AUTHZ_TTL_SECONDS are served `degraded: true` with only what
that check allowed; past it, and for everything else (first pages, writes, a token check
that needs PostgreSQL), UNAVAILABLE with retryAfter. Nothing acknowledged is lost, and
everything works again after the restart.

A private postmaster on its own port (tests/reliability/private_postgres.py), an API process
against it; the shared server is never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import redis.asyncio as aioredis
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

from app.auth.revocation import version_key
from app.operation_documents import operations
from tests.helpers import block, eventually, follow, gql, ids, make_user, post
from tests.realtime.live import PROTOCOL
from tests.reliability.private_postgres import private_postgres
from tests.servers import ApiServer

TTL = 8.0  # FEED_AUTHZ_TTL_SECONDS of the server under test (slack for a loaded CI machine)
OUTAGE_SECONDS = 10.0  # past the TTL either way (the issue names 6 s; longer is stricter)
PAGE = 5  # the check of a page reads PAGE more ids: at most 3 hidden leaves 2 for later
ALLOWED = {"UNAVAILABLE", "OVERLOADED"}  # what a request may fail with while PostgreSQL is away


@dataclass
class Answer:
    sent: float  # loop time the request was sent
    received: float  # loop time the answer came back
    data: dict[str, Any] | None
    codes: list[str]


class Client:
    """Calls through the public API, recording every answer; any error but UNAVAILABLE (with
    a retryAfter) or OVERLOADED fails the test at once."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.codes: Counter[str] = Counter()

    async def call(self, operation: str, variables: dict[str, Any], token: str) -> Answer:
        sent = asyncio.get_running_loop().time()
        payload = {"query": operations()[operation], "operationName": operation}
        response = await self.http.post(
            "/graphql",
            json={**payload, "variables": variables},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert "Traceback" not in response.text
        body = response.json()
        codes = []
        for error in body.get("errors") or []:
            extensions = error.get("extensions", {})
            code = extensions.get("code")
            assert code in ALLOWED, (operation, response.status_code, error)
            if code == "UNAVAILABLE":
                assert isinstance(extensions.get("retryAfter"), int), error
                assert extensions["retryAfter"] > 0, error
            codes.append(code)
            self.codes[code] += 1
        self.codes["ok" if not codes else "error"] += 1
        received = asyncio.get_running_loop().time()
        return Answer(sent, received, None if codes else body["data"], codes)


async def refused_socket(api: ApiServer, token: str) -> tuple[int, str]:
    """Open a socket with `token` and return how the server closed it at connection_init."""
    async with connect(api.ws_url, subprotocols=[Subprotocol(PROTOCOL)]) as ws:
        payload = {"authorization": f"Bearer {token}"}
        await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
        with contextlib.suppress(ConnectionClosed):
            message = await asyncio.wait_for(ws.recv(), 10)
            raise AssertionError(f"the socket was answered: {message}")
        assert ws.close_code is not None
        return ws.close_code, ws.close_reason or ""


async def test_postgres_stopped_serves_recently_verified_pages_then_unavailable() -> None:
    with private_postgres() as pg:
        env = {
            "DATABASE_URL": pg.url,
            "RATE_LIMIT_READS_PER_MINUTE": "100000",
            "RATE_LIMIT_WRITES_PER_MINUTE": "100000",
            "FEED_AUTHZ_TTL_SECONDS": str(TTL),
        }
        async with ApiServer(env=env) as api, api.http() as http:
            client = Client(http)
            writer, _ = await make_user(http, "writer")
            blocker, _ = await make_user(http, "blocker")
            reader, _ = await make_user(http, "reader")
            newcomer, newcomer_id = await make_user(http, "newcomer")
            # First pages during the outage are read by another viewer: a viewer's verified
            # window is that of their last session page (app.feed.verified), so the reader's
            # own first page between the third page and the stop would replace it.
            refresher, _ = await make_user(http, "refresher")
            for viewer in (reader, refresher):
                await follow(http, viewer, "writer")
                await follow(http, viewer, "blocker")
            made = [await post(http, writer, f"p{i}") for i in range(14)]
            theirs = [await post(http, blocker, f"b{i}") for i in range(2)]

            async def page(after: str | None, viewer: str = reader) -> Answer:
                variables = {"first": PAGE, "after": after, "mode": "RANKED"}
                return await client.call("Feed", variables, viewer)

            first = await page(None)
            assert first.data is not None
            session = first.data["feed"]
            assert set(ids(session)) <= {*made, *theirs}
            # Hidden after the session froze its ids, before its next page is checked: the
            # check (page 2, reading one page ahead) must leave them out, and so must every
            # page served from that check.
            hidden = {*theirs, *[p for p in made if p not in ids(session)][:1]}
            for post_id in hidden - set(theirs):
                (await gql(http, "DeletePost", {"id": str(post_id)}, token=writer)).ok()
            await block(http, blocker, "reader")
            second = await page(session["pageInfo"]["endCursor"])
            assert second.data is not None and not second.data["feed"]["degraded"]
            assert not hidden & set(ids(second.data["feed"]))
            cursor = second.data["feed"]["pageInfo"]["endCursor"]
            checked_by = asyncio.get_running_loop().time()  # the check ran before this

            answers: list[Answer] = []  # of the third page (after `cursor`)
            first_pages: list[Answer] = []
            writes: list[Answer] = []
            acknowledged: list[int] = []
            stop = asyncio.Event()

            async def read_loop() -> None:
                while not stop.is_set():
                    answers.append(await page(cursor))
                    first_pages.append(await page(None, refresher))
                    await asyncio.sleep(0.05)

            async def write_loop() -> None:
                i = 0
                while not stop.is_set():
                    answer = await client.call("CreatePost", {"body": f"w{i}"}, writer)
                    writes.append(answer)
                    if answer.data is not None:
                        acknowledged.append(int(answer.data["createPost"]["id"]))
                    i += 1
                    await asyncio.sleep(0.05)

            loops = [asyncio.create_task(f()) for f in (read_loop, write_loop)]
            await asyncio.to_thread(pg.stop)
            down_since = asyncio.get_running_loop().time()
            try:
                # A token whose version Redis no longer holds needs PostgreSQL to be checked:
                # UNAVAILABLE, neither a pass nor UNAUTHENTICATED (nor INTERNAL).
                async with aioredis.Redis.from_url(os.environ["REDIS_URL"]) as redis:
                    await redis.delete(version_key(newcomer_id))
                assert (await client.call("Viewer", {}, newcomer)).codes == ["UNAVAILABLE"]
                # The same over a websocket: closed 1013 ("try again later", which standard
                # clients retry), not 4403 (a verdict on the token).
                code, reason = await refused_socket(api, newcomer)
                assert code == 1013 and "Try again later" in reason, (code, reason)

                def past_the_ttl_unavailable() -> bool:
                    for loop in loops:  # a loop that failed (an INTERNAL) fails the test now
                        if loop.done():
                            loop.result()
                    return any(
                        a.sent > checked_by + TTL and "UNAVAILABLE" in a.codes for a in answers
                    )

                await eventually(past_the_ttl_unavailable, within=TTL + 15, what="past the TTL")
                await eventually(
                    lambda: (
                        past_the_ttl_unavailable()
                        and asyncio.get_running_loop().time() >= down_since + OUTAGE_SECONDS
                    ),
                    within=OUTAGE_SECONDS + 5,
                    interval=0.1,
                    what="the outage's end",
                )
                down_answers = [a for a in answers if a.sent >= down_since]
                down_writes = [a for a in writes if a.sent >= down_since]
                down_first_pages = [a for a in first_pages if a.sent >= down_since]
            finally:
                down_for = asyncio.get_running_loop().time() - down_since
                await asyncio.to_thread(pg.start)
            up_writes = len(acknowledged)
            await eventually(lambda: len(acknowledged) > up_writes + 3, within=30, what="writes")

            async def healthy_third_page() -> Answer | None:
                answer = await page(cursor)
                return answer if answer.data and not answer.data["feed"]["degraded"] else None

            fresh = await eventually(healthy_third_page, within=30, what="third page again")
            stop.set()
            await asyncio.gather(*loops)

            # Within the TTL the third page came from the check, degraded, with none of the
            # posts hidden before it: what PostgreSQL answers for it again now, as far as
            # the check read ahead (it may stop short of a full page).
            degraded = [a for a in answers if a.data and a.data["feed"]["degraded"]]
            assert degraded, f"no degraded page while PostgreSQL was away: {client.codes}"
            assert fresh.data is not None
            for answer in degraded:
                # The check it came from: the last one answered before it was sent (third
                # pages read while PostgreSQL was still up checked again), page 2's at least.
                checks = [checked_by] + [
                    a.received
                    for a in answers
                    if a.data and not a.data["feed"]["degraded"] and a.received <= answer.sent
                ]
                assert answer.sent <= max(checks) + TTL, "served past the authorization TTL"
                assert answer.data is not None
                feed = answer.data["feed"]
                assert ids(feed) and ids(feed) == ids(fresh.data["feed"])[: len(ids(feed))]
                assert not hidden & set(ids(feed))
                assert feed["sessionId"] == session["sessionId"]
            # Past it, and for what no check covers (first pages, writes): UNAVAILABLE.
            assert any("UNAVAILABLE" in a.codes for a in down_answers)
            assert any("UNAVAILABLE" in a.codes for a in down_first_pages)
            assert any("UNAVAILABLE" in a.codes for a in down_writes)
            rows = await asyncpg.connect(pg.url)
            try:
                stored = {r[0] for r in await rows.fetch("SELECT id FROM posts")}
            finally:
                await rows.close()
            assert set(acknowledged) <= stored, "an acknowledged post was lost"
            again = await page(None)
            assert again.data is not None and ids(again.data["feed"])
            print(
                f"down {down_for:.1f} s; answers {dict(client.codes)}; degraded pages"
                f" {len(degraded)}; page-3 reads while down {len(down_answers)}, writes"
                f" {len(down_writes)}, first pages {len(down_first_pages)}"
            )
