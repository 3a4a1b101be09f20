"""PROFILE=production (docs/API.md, "Production profile"; docs/decisions/0016): GraphiQL and
introspection off on every transport, /metrics only with METRICS_TOKEN; and the inputs every
profile bounds (a GET query string, like a body, at MAX_REQUEST_BYTES).

The production server is a real uvicorn process; the development answers come from the
in-process app (`client`), which runs the default profile.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from app.api.transports.graphiql import GRAPHIQL_ASSETS_PATH, SCRIPTS
from app.config import PROJECT_ROOT, get_settings
from app.operation_documents import DOCUMENT_ID_PREFIX, sha256_hex
from app.state import create_state
from app.web import create_app
from tests.helpers import codes, make_user
from tests.realtime.live import LiveClient
from tests.servers import ApiServer

METRICS_TOKEN = "metrics-token-for-the-production-profile-test"
INTROSPECTION = [
    "{ __schema { queryType { name } } }",
    '{ __type(name: "Post") { fields { name } } }',
    'query { user(handle: "x") { handle } __schema { types { name } } }',
]


@pytest.fixture(scope="module")
async def production(test_database: str) -> AsyncIterator[ApiServer]:
    env = {"PROFILE": "production", "METRICS_TOKEN": METRICS_TOKEN}
    async with ApiServer(env=env) as server:
        yield server


async def test_graphiql_is_not_served(production: ApiServer) -> None:
    async with production.http() as http:
        page = await http.get("/graphql", headers={"accept": "text/html"})
        assert page.status_code == 404
        assert codes(page.json()) == ["BAD_USER_INPUT"]
        assert "GraphiQL is not served here" in page.json()["errors"][0]["message"]
        asset = await http.get(f"{GRAPHIQL_ASSETS_PATH}/{SCRIPTS[0]}")
        assert asset.status_code == 404
        # The API itself is unchanged: queries by POST and GET.
        query = '{ user(handle: "nobody") { handle } }'
        assert (await http.post("/graphql", json={"query": query})).json() == {
            "data": {"user": None}
        }
        assert (await http.get("/graphql", params={"query": query})).json() == {
            "data": {"user": None}
        }


@pytest.mark.parametrize("query", INTROSPECTION)
async def test_introspection_is_refused_over_post_and_get(
    production: ApiServer, query: str
) -> None:
    async with production.http() as http:
        answers = [
            await http.post("/graphql", json={"query": query}),
            await http.get("/graphql", params={"query": query}),
            # Named by its hash as well (the persisted-documents path): the text still runs
            # the validation every unregistered text gets.
            await http.post(
                "/graphql",
                json={"query": query, "documentId": DOCUMENT_ID_PREFIX + sha256_hex(query)},
            ),
            await http.post(
                "/graphql",
                json={"query": query},
                headers={"accept": "application/graphql-response+json"},
            ),
        ]
        by_hash_only = await http.post(
            "/graphql", json={"documentId": DOCUMENT_ID_PREFIX + sha256_hex(query)}
        )
    for answer in answers:
        body = answer.json()
        assert set(codes(body)) == {"BAD_USER_INPUT"}, body  # one error per field asked
        assert "introspection has been disabled" in body["errors"][0]["message"]
        assert body.get("data") is None
    assert answers[-1].status_code == 400  # a request error under the newer media type
    assert codes(by_hash_only.json()) == ["PERSISTED_QUERY_NOT_FOUND"]  # never registered


async def test_introspection_is_refused_over_the_websocket(production: ApiServer) -> None:
    async with production.http() as http:
        token, _ = await make_user(http, "prod_socket")
    live = await LiveClient.open(production, token, subscribe=False)
    try:
        await live.ws.send(
            json.dumps({"id": "1", "type": "subscribe", "payload": {"query": INTROSPECTION[0]}})
        )
        message = json.loads(await asyncio.wait_for(live.ws.recv(), 5))
    finally:
        await live.close()
    assert message["type"] == "error", message
    assert {e["extensions"]["code"] for e in message["payload"]} == {"BAD_USER_INPUT"}


async def test_metrics_want_the_token(production: ApiServer) -> None:
    async with production.http() as http:
        anonymous = await http.get("/metrics")
        wrong = await http.get("/metrics", headers={"authorization": "Bearer nope"})
        right = await http.get("/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"})
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
    assert wrong.status_code == 401
    assert right.status_code == 200 and "feed_graphql_request_seconds" in right.text


async def test_production_without_a_metrics_token_serves_no_metrics(test_database: str) -> None:
    env = {"PROFILE": "production", "METRICS_TOKEN": ""}
    async with ApiServer(env=env) as server, server.http() as http:
        assert (await http.get("/metrics")).status_code == 404
        assert (await http.get("/readyz")).status_code in (200, 503)  # probes stay open


async def test_development_keeps_graphiql_and_introspection(client: httpx.AsyncClient) -> None:
    assert get_settings().profile == "development"
    page = await client.get("/graphql", headers={"accept": "text/html"})
    assert page.status_code == 200 and "graphiql" in page.text.lower()
    body = (await client.post("/graphql", json={"query": INTROSPECTION[0]})).json()
    assert body == {"data": {"__schema": {"queryType": {"name": "Query"}}}}
    assert (await client.get("/metrics")).status_code == 200


async def test_a_get_query_string_over_the_limit_is_refused_typed(test_database: str) -> None:
    limit = 4096  # below what httptools (64 KiB) and httpx allow in a URL
    settings = get_settings().model_copy(update={"max_request_bytes": limit})
    state = create_state(settings)
    try:
        transport = httpx.ASGITransport(app=create_app(state))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            padding = " " * limit  # a valid document, only too long
            answer = await client.get("/graphql", params={"query": "{ __typename }" + padding})
            fits = await client.get("/graphql", params={"query": "{ __typename }"})
    finally:
        await state.close()
    assert answer.status_code == 414
    assert codes(answer.json()) == ["BAD_USER_INPUT"]
    assert str(limit) in answer.json()["errors"][0]["message"]
    assert fits.json() == {"data": {"__typename": "Query"}}


def test_production_refuses_the_dev_key_and_test_hooks(tmp_path) -> None:
    env = {**os.environ, "PROFILE": "production", "RUN_DIR": str(tmp_path)}
    env.pop("SECRET_KEY")
    check = [sys.executable, "-c", "from app.config import Settings; Settings()"]
    no_key = subprocess.run(check, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert no_key.returncode != 0
    assert "PROFILE=production needs SECRET_KEY set" in no_key.stderr
    env = {**env, "SECRET_KEY": "k" * 40, "JOB_FAULT_HOOK": "1"}
    hook = subprocess.run(check, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert "JOB_FAULT_HOOK is test-only" in hook.stderr
    env["JOB_FAULT_HOOK"] = "0"
    assert subprocess.run(check, env=env, cwd=PROJECT_ROOT).returncode == 0
