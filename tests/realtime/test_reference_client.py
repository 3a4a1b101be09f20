"""Conformance: the reference `graphql-ws` npm client (GraphiQL, Apollo, urql) against a real
uvicorn, with the write path through the outbox relay and real ARQ workers.

The client is tests/realtime/reference_client/client.mjs, its packages pinned by the
committed package-lock.json and installed here with `npm ci` when node_modules is missing or
was installed from another lock file. Only a machine without node/npm skips these tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import follow, make_user, post
from tests.realtime.live import LiveClient
from tests.servers import ApiServer, npm_ci

CLIENT_DIR = Path(__file__).parent / "reference_client"

READY_SECONDS = 20.0
EXIT_SECONDS = 20.0


@pytest.fixture(scope="session")
def reference_client() -> Iterator[Path]:
    """client.mjs with its pinned node_modules in place (`npm ci` when missing or stale)."""
    npm_ci(CLIENT_DIR)
    yield CLIENT_DIR / "client.mjs"


@dataclass
class NodeRun:
    """One run of client.mjs: its events (parsed stdout lines) and its end."""

    proc: asyncio.subprocess.Process
    events: list[dict[str, Any]] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)
    stderr: str = ""

    @classmethod
    async def start(
        cls,
        script: Path,
        server: ApiServer,
        token: str,
        events: int,
        auth_key: str | None = None,
        retry: str = "none",
    ) -> NodeRun:
        env = {**os.environ, "FEED_RETRY": retry}
        env.pop("FEED_AUTH_KEY", None)
        if auth_key is not None:
            env["FEED_AUTH_KEY"] = auth_key
        timeout = str(READY_SECONDS + EXIT_SECONDS)  # the client's own deadline, in seconds
        proc = await asyncio.create_subprocess_exec(
            "node", str(script), server.ws_url, token, str(events), timeout,
            cwd=CLIENT_DIR,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        return cls(proc)

    def _take(self, line: str) -> None:
        self.stdout.append(line)
        if line.startswith("{"):
            self.events.append(json.loads(line))

    async def ready(self) -> dict[str, Any]:
        """Lines up to READY; the first event (the subscription is live on the server)."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(READY_SECONDS):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:  # exited before READY
                    await self.finish()
                    raise AssertionError(f"client ended before READY: {self.report()}")
                line = raw.decode().strip()
                if line == "READY":
                    assert self.events, self.report()
                    return self.events[0]
                self._take(line)

    async def finish(self) -> int:
        """Wait for the exit; the rest of stdout is parsed, stderr kept."""
        async with asyncio.timeout(EXIT_SECONDS):
            out, err = await self.proc.communicate()
        for line in out.decode().splitlines():
            if line.strip() and line.strip() != "READY":
                self._take(line.strip())
        self.stderr = err.decode()
        assert self.proc.returncode is not None
        return self.proc.returncode

    def problem(self) -> dict[str, Any]:
        """The JSON line the client wrote to stderr on failure."""
        lines = [line for line in self.stderr.splitlines() if line.startswith("{")]
        assert lines, self.report()
        return dict(json.loads(lines[-1]))

    @property
    def attempts(self) -> int:
        """Connections the client opened (its `connecting` events)."""
        return self.stderr.splitlines().count("CONNECTING")

    def report(self) -> str:
        return f"exit={self.proc.returncode} stdout={self.stdout!r} stderr={self.stderr!r}"

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


def update(event: dict[str, Any]) -> dict[str, Any]:
    assert "errors" not in event, event
    return dict(event["data"]["feedUpdates"])


async def test_reference_client_receives_a_followees_post(
    server: ApiServer, pipeline, reference_client: Path
) -> None:
    """The client sends `Authorization` capitalised, as GraphiQL users type it."""
    async with server.http() as http:
        author, _ = await make_user(http, "author")
        fan, _ = await make_user(http, "fan")
        await follow(http, fan, "author")
        await pipeline.settle()

        run = await NodeRun.start(reference_client, server, fan, events=2)
        try:
            first = update(await run.ready())
            assert first == {"newPostCount": 0, "latestPostAt": None}, run.report()

            await post(http, author, "hello, reference client")
            await pipeline.settle()
            code = await run.finish()
        finally:
            run.kill()
        assert code == 0, run.report()
        assert len(run.events) == 2, run.report()
        second = update(run.events[1])
        assert second["newPostCount"] == 1, run.report()
        assert second["latestPostAt"], run.report()


@pytest.mark.parametrize("key", ["authorization", "Authorization", "AUTHORIZATION"])
async def test_connection_init_key_in_any_letter_case(
    server: ApiServer, reference_client: Path, key: str
) -> None:
    async with server.http() as http:
        token, _ = await make_user(http, "reader")
    run = await NodeRun.start(reference_client, server, token, events=1, auth_key=key)
    try:
        code = await run.finish()
    finally:
        run.kill()
    assert code == 0, run.report()
    assert update(run.events[0])["newPostCount"] == 0


@pytest.mark.parametrize(
    ("token", "auth_key"),
    [("not-a-token", None), ("not-a-token", "token")],
    ids=["bad-token", "no-authorization-key"],
)
async def test_rejected_socket_is_closed_4403_saying_what_to_send(
    server: ApiServer, reference_client: Path, token: str, auth_key: str | None
) -> None:
    run = await NodeRun.start(reference_client, server, token, events=1, auth_key=auth_key)
    try:
        code = await run.finish()
    finally:
        run.kill()
    assert code == 3, run.report()  # client.mjs: closed by the server before the events came
    assert not run.events, run.report()
    problem = run.problem()
    assert problem["error"] == "closed", problem
    assert problem["code"] == 4403, problem
    # The reason is the client's only clue: it must name what to send (a Bearer token in
    # connection_init's `authorization`), not just "Forbidden".
    assert re.search(r"bearer", problem["reason"], re.I), problem


@pytest.fixture(scope="module")
async def capped(test_database: str) -> AsyncIterator[ApiServer]:
    env = {"REALTIME_SOCKETS_PER_USER": "2", "REALTIME_SUBSCRIPTIONS_PER_USER": "1"}
    async with ApiServer(env=env) as api:
        yield api


async def test_past_the_socket_cap_the_client_stops_at_4429_without_retrying(
    capped: ApiServer, reference_client: Path
) -> None:
    """With graphql-ws's default reconnect policy (5 attempts): 4429 is one of its fatal
    codes, so it gives up at once with the close reason, as docs/API.md tells clients."""
    async with capped.http() as http:
        token, _ = await make_user(http, "tabs")
    held = [await LiveClient.open(capped, token, subscribe=False) for _ in range(2)]
    run = await NodeRun.start(reference_client, capped, token, events=1, retry="default")
    try:
        code = await run.finish()
    finally:
        run.kill()
        for live in held:
            await live.close()
    assert code == 3, run.report()
    problem = run.problem()
    assert problem["code"] == 4429 and "at most 2" in problem["reason"], problem
    assert run.attempts == 1, run.report()


async def test_past_the_subscription_cap_the_client_gets_a_typed_error(
    capped: ApiServer, reference_client: Path
) -> None:
    async with capped.http() as http:
        token, _ = await make_user(http, "subscriber")
    held = await LiveClient.open(capped, token)
    run = await NodeRun.start(reference_client, capped, token, events=1)
    try:
        code = await run.finish()
    finally:
        run.kill()
        await held.close()
    assert code == 1, run.report()
    problem = run.problem()
    assert problem["error"] == "graphql", problem
    [error] = problem["errors"]
    assert error["extensions"] == {"code": "RATE_LIMITED", "limit": 1}, problem


async def test_the_documented_retry_policy_stops_at_a_refused_token(
    server: ApiServer, reference_client: Path
) -> None:
    """graphql-ws retries 4403 by default (five more sockets with the same bad token); the
    policy docs/API.md gives stops at the first."""
    run = await NodeRun.start(reference_client, server, "not-a-token", events=1, retry="documented")
    try:
        code = await run.finish()
    finally:
        run.kill()
    assert code == 3, run.report()
    assert run.problem()["code"] == 4403, run.report()
    assert run.attempts == 1, run.report()
