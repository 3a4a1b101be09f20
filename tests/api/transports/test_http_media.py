"""GraphQL over HTTP media types (app/api/transports/http_media.py), request by request.

`Accept: application/graphql-response+json` gets that Content-Type, 400 and no `data` entry
for a request error (parse, validation, variable coercion, malformed body, refused trusted
document), and 200 once execution ran; `application/json`, `*/*` and no `Accept` keep the
older answers (200 and `"data": null` for every GraphQL error).
tests/api/transports/test_graphql_http_audit.py runs the spec's reference audits; these pin the
same rules and our own paths.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.api.transports.http_media import GRAPHQL_RESPONSE, negotiate
from app.operation_documents import document_id, operations
from tests.helpers import codes, make_user

GRAPHQL_RESPONSE_TYPE = "application/graphql-response+json; charset=utf-8"
NO_ACCEPT = None

VIEWER = "query Viewer { viewer { handle } }"
PARSE_ERROR = "{"
VALIDATION_ERROR = "{ noSuchField }"
POST_BY_ID = "query PostById($id: ID!) { post(id: $id) { id } }"


async def send(
    client: httpx.AsyncClient,
    accept: str | None,
    body: dict[str, Any] | None = None,
    *,
    content: bytes | None = None,
    token: str | None = None,
) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    request = client.build_request("POST", "/graphql", json=body, content=content, headers=headers)
    del request.headers["accept"]  # httpx sends */* unless told otherwise
    if accept is not NO_ACCEPT:
        request.headers["accept"] = accept
    return await client.send(request)


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, "application/json"),
        ("", "application/json"),
        ("*/*", "application/json"),
        ("application/*", "application/json"),
        ("application/json", "application/json"),
        (GRAPHQL_RESPONSE, GRAPHQL_RESPONSE),
        (f"{GRAPHQL_RESPONSE}, application/json;q=0.9", GRAPHQL_RESPONSE),
        (f"application/json, {GRAPHQL_RESPONSE}", GRAPHQL_RESPONSE),
        (f"application/json, {GRAPHQL_RESPONSE};q=0.5", "application/json"),
        (f"{GRAPHQL_RESPONSE}; charset=utf-8, */*;q=0.1", GRAPHQL_RESPONSE),
        (f"*/*, {GRAPHQL_RESPONSE};q=0", "application/json"),
        ("text/html", None),
        (f"text/html, {GRAPHQL_RESPONSE};q=0", None),
    ],
)
def test_negotiation_picks_the_best_served_type(accept: str | None, chosen: str | None) -> None:
    assert negotiate(accept) == chosen


@pytest.mark.parametrize(
    "query", [PARSE_ERROR, VALIDATION_ERROR], ids=["parse-error", "validation-error"]
)
async def test_graphql_response_request_errors_are_400_without_data(
    client: httpx.AsyncClient, query: str
) -> None:
    response = await send(client, GRAPHQL_RESPONSE, {"query": query})
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == GRAPHQL_RESPONSE_TYPE
    body = response.json()
    assert "data" not in body, body
    assert codes(body) == ["BAD_USER_INPUT"]


async def test_graphql_response_variable_coercion_error_is_400_without_data(
    client: httpx.AsyncClient,
) -> None:
    for variables in ({}, {"id": {"not": "an id"}}):
        body_sent = {"query": POST_BY_ID, "variables": variables}
        response = await send(client, GRAPHQL_RESPONSE, body_sent)
        assert response.status_code == 400, response.text
        assert response.headers["content-type"] == GRAPHQL_RESPONSE_TYPE
        body = response.json()
        assert "data" not in body, body
        assert codes(body) == ["BAD_USER_INPUT"]


async def test_graphql_response_success_and_field_errors_are_200_with_data(
    client: httpx.AsyncClient,
) -> None:
    token, _ = await make_user(client, "reader")
    response = await send(client, GRAPHQL_RESPONSE, {"query": VIEWER}, token=token)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == GRAPHQL_RESPONSE_TYPE
    assert response.json() == {"data": {"viewer": {"handle": "reader"}}}

    # Execution ran: a field error keeps `data` (null here: a non-null root field) and the 200.
    response = await send(client, GRAPHQL_RESPONSE, {"query": 'mutation { deletePost(id: "1") }'})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == GRAPHQL_RESPONSE_TYPE
    body = response.json()
    assert body["data"] is None, body
    assert codes(body) == ["UNAUTHENTICATED"]


async def test_graphql_response_malformed_body_is_400_graphql_response(
    client: httpx.AsyncClient,
) -> None:
    response = await send(client, GRAPHQL_RESPONSE, content=b"{not json")
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == GRAPHQL_RESPONSE_TYPE
    body = response.json()
    assert "data" not in body, body
    assert codes(body) == ["BAD_USER_INPUT"]


@pytest.mark.parametrize("accept", [NO_ACCEPT, "*/*", "application/json"])
async def test_application_json_keeps_200_and_null_data_for_every_graphql_error(
    client: httpx.AsyncClient, accept: str | None
) -> None:
    requests: list[dict[str, Any]] = [
        {"query": PARSE_ERROR},
        {"query": VALIDATION_ERROR},
        {"query": POST_BY_ID, "variables": {}},
        {"documentId": "sha256:" + "0" * 64},
    ]
    for sent in requests:
        response = await send(client, accept, sent)
        assert response.status_code == 200, (sent, response.text)
        assert response.headers["content-type"] == "application/json"
        body = response.json()
        assert body["data"] is None, body
        assert body["errors"], body

    response = await send(client, accept, {"query": "{ __typename }"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"data": {"__typename": "Query"}}

    # A body that is no GraphQL request: 400 with a typed error, no `data`.
    for content in (b"{not json", b"null", b"[1]", b"\xff\xfe{"):
        response = await send(client, accept, content=content)
        assert response.status_code == 400, content
        assert response.headers["content-type"] == "application/json"
        assert response.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        assert "data" not in response.json()


async def test_trusted_documents_answer_in_the_negotiated_type(client: httpx.AsyncClient) -> None:
    token, _ = await make_user(client, "reader")
    known = {"documentId": document_id(operations()["Viewer"]), "operationName": "Viewer"}
    response = await send(client, GRAPHQL_RESPONSE, known, token=token)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == GRAPHQL_RESPONSE_TYPE
    assert response.json()["data"]["viewer"]["handle"] == "reader"

    unknown = {"documentId": "sha256:" + "0" * 64}
    response = await send(client, GRAPHQL_RESPONSE, unknown, token=token)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == GRAPHQL_RESPONSE_TYPE
    body = response.json()
    assert "data" not in body, body
    assert codes(body) == ["PERSISTED_QUERY_NOT_FOUND"]


async def test_unacceptable_accept_is_406_but_a_browser_still_gets_graphiql(
    client: httpx.AsyncClient,
) -> None:
    response = await send(client, "text/html", {"query": "{ __typename }"})
    assert response.status_code == 406, response.text
    assert GRAPHQL_RESPONSE in response.text

    page = await client.get("/graphql", headers={"accept": "text/html"})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
