"""docs/API.md "Clients": the Apollo Client 4 recipe, run as written against a real uvicorn with
the write path through the outbox relay and real ARQ workers.

apollo/client.mjs and apollo/feed.mjs are the recipe (tests/docs/test_client_recipes.py holds
them equal to the docs' blocks); apollo/run.mjs drives them and reports one JSON line per step.
Packages pinned by apollo/package-lock.json, installed with `npm ci` (tests/servers.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import get_settings
from tests.helpers import follow, gql, make_user, post
from tests.servers import ApiServer, npm_ci

APOLLO_DIR = Path(__file__).parent / "apollo"
STEP_SECONDS = 30.0
PAGE = 2  # run.mjs's page size: three pages are six posts
RFC_3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00$")


@pytest.fixture(scope="module")
async def api(test_database: str) -> AsyncIterator[ApiServer]:
    """One RANKED session per viewer and no session reuse: a second device's first page ends
    the first device's session, so its next page answers CURSOR_EXPIRED."""
    env = {"FEED_SESSIONS_PER_VIEWER": "1", "FEED_SESSION_REUSE_SECONDS": "0"}
    async with ApiServer(env=env) as server:
        yield server


class Steps:
    """run.mjs's JSON lines, one step at a time."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.seen: list[dict[str, Any]] = []

    async def next(self, step: str) -> dict[str, Any]:
        assert self.proc.stdout is not None
        async with asyncio.timeout(STEP_SECONDS):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    raise AssertionError(f"run.mjs ended before {step!r}: {await self.report()}")
                line = json.loads(raw)
                self.seen.append(line)
                if line["step"] == "error":
                    raise AssertionError(f"run.mjs failed: {await self.report()}")
                if line["step"] == step:
                    return dict(line)

    async def report(self) -> str:
        err = b""
        if self.proc.stderr is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    err = await self.proc.stderr.read()
        return f"steps={self.seen!r} stderr={err.decode()[-3000:]!r}"


def apq_learning_on() -> bool:
    """The setting APQ_LEARN (learned persisted queries, decision 0082): on by default."""
    return get_settings().apq_learn


async def learns_persisted_queries(http: httpx.AsyncClient, token: str) -> bool:
    """Whether the server runs a hash alone once its text was sent with it."""
    text = "query LearnProbe { viewer { id } }"
    digest = hashlib.sha256(text.encode()).hexdigest()
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": digest}}
    headers = {"Authorization": f"Bearer {token}"}
    await http.post("/graphql", json={"query": text, "extensions": extensions}, headers=headers)
    again = (await http.post("/graphql", json={"extensions": extensions}, headers=headers)).json()
    return again.get("data") is not None


async def test_the_apollo_recipe_pages_caches_subscribes_and_persists(
    api: ApiServer, pipeline: Any
) -> None:
    npm_ci(APOLLO_DIR)
    async with api.http() as http:
        author, _ = await make_user(http, "author")
        viewer, _ = await make_user(http, "viewer")
        await follow(http, viewer, "author")
        posted = [await post(http, author, f"post {n}") for n in range(8)]
        # Likes lift the two oldest posts in RANKED, so its order is not CHRONOLOGICAL's.
        for n in range(3):
            liker, _ = await make_user(http, f"liker{n}")
            for post_id in posted[:2]:
                (await gql(http, "LikePost", {"id": str(post_id)}, token=liker)).ok()
        await pipeline.settle()
        newest_first = [str(post_id) for post_id in reversed(posted)]

        env = {
            **os.environ,
            "CLIENT_HTTP_URL": api.url + "/graphql",
            "CLIENT_WS_URL": api.ws_url,
            "CLIENT_TOKEN": viewer,
        }
        proc = await asyncio.create_subprocess_exec(
            "node", "run.mjs", cwd=APOLLO_DIR, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        steps = Steps(proc)
        try:
            chronological = await steps.next("feed")
            ranked = await steps.next("feed")
            refetched = await steps.next("refetched")
            expired = await steps.next("expired")
            subscribed = await steps.next("subscribed")
            await post(http, author, "while subscribed")
            await pipeline.settle()
            update = await steps.next("update")
            apq = await steps.next("apq")
            await steps.next("done")
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            await proc.wait()
        learns = await learns_persisted_queries(http, viewer)

    # Three pages through fetchMore grow one cached list per mode; the modes stay apart.
    assert chronological["mode"] == "CHRONOLOGICAL" and ranked["mode"] == "RANKED"
    assert chronological["lengths"] == [PAGE, 2 * PAGE, 3 * PAGE], chronological
    assert ranked["lengths"] == [PAGE, 2 * PAGE, 3 * PAGE], ranked
    assert chronological["ids"] == newest_first[: 3 * PAGE], chronological
    assert len(set(ranked["ids"])) == 3 * PAGE and set(ranked["ids"]) <= set(newest_first)
    assert ranked["ids"] != chronological["ids"], "RANKED kept time order: the check is blind"
    assert chronological["cachedAfterBoth"] == chronological["ids"], chronological
    assert ranked["cachedAfterBoth"] == ranked["ids"], ranked
    assert all(RFC_3339_UTC.match(at) for at in chronological["createdAt"]), chronological
    # A first page replaces the list.
    assert refetched["ids"] == newest_first[:PAGE], refetched
    # CURSOR_EXPIRED: the recipe reloads the first page, which replaces the list.
    assert expired["before"] == 3 * PAGE and len(expired["after"]) == PAGE, expired
    # The subscription over GraphQLWsLink: the count at once, then the followee's post.
    assert subscribed["frame"]["newPostCount"] == 0, subscribed
    last = update["frames"][-1]
    assert last["newPostCount"] == 1 and RFC_3339_UTC.match(last["latestPostAt"]), update
    # APQ: the hash alone, PERSISTED_QUERY_NOT_FOUND, the text with its hash; then, where the
    # server learns texts (APQ_LEARN), the hash alone is enough: one request a call.
    assert apq_learning_on() and learns, "the test server runs with APQ_LEARN on"
    assert apq["perCall"] == [2, 1, 1], apq
