"""GraphQL over HTTP media types: `application/graphql-response+json` negotiated from `Accept`.

The GraphQL over HTTP spec's newer media type lets the status code speak: a request error
(a body that is no GraphQL request, a document that does not parse or validate, variables
that do not coerce, a trusted document that is refused) is a 4xx whose body has no `data`
entry, while a result that executed (even with field errors, even `data: null`) is a 200.
`application/json` clients (and those sending no `Accept`, or `*/*`) keep the older rules
unchanged: 200 for every GraphQL error, `"data": null` included, plain-text request errors.

FeedGraphQL (app/web.py) calls the hooks: `negotiate_request` when a request arrives (the
choice is kept in the ASGI scope; `not_acceptable` when nothing fits and no GraphiQL page
is asked for), `shape_result` on each execution result, and `finish` on the response, which
sets the Content-Type and status; `request_error` renders a refused request (malformed
body, unknown operation, ...) in the negotiated type.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any

import orjson
from cross_web import HTTPException
from graphql import GraphQLError
from starlette.responses import PlainTextResponse, Response
from strawberry.http import GraphQLHTTPResponse
from strawberry.types import ExecutionResult

from app.errors import AppError, BadInput

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"
CONTENT_TYPES = {GRAPHQL_RESPONSE: f"{GRAPHQL_RESPONSE}; charset=utf-8", JSON: JSON}

SCOPE_KEY = "hybridfeed.media_type"  # the negotiated type, None when nothing fits (406)
STATUS_KEY = "hybridfeed.media_status"  # a request error's status under GRAPHQL_RESPONSE

# Media ranges a GraphQL client may send; wildcards mean today's application/json.
_WILDCARDS = {"*/*": JSON, "application/*": JSON}
_TYPES = {GRAPHQL_RESPONSE: GRAPHQL_RESPONSE, JSON: JSON}


def negotiate(accept: str | None) -> str | None:
    """The media type to answer with, None when `Accept` names none we serve.

    No (or an empty) `Accept` means application/json, as the spec asks. Among the ranges
    we serve the highest quality wins; on a tie a named type beats a wildcard and
    application/graphql-response+json beats application/json.
    """
    if accept is None or not accept.strip():
        return JSON
    best: tuple[float, int, str] | None = None
    for media_range, quality in _ranges(accept):
        if quality <= 0:
            continue
        if media_range in _TYPES:
            chosen, rank = _TYPES[media_range], 2 if media_range == GRAPHQL_RESPONSE else 1
        elif media_range in _WILDCARDS:
            chosen, rank = _WILDCARDS[media_range], 0
        else:
            continue
        candidate = (quality, rank, chosen)
        if best is None or candidate[:2] > best[:2]:
            best = candidate
    return None if best is None else best[2]


def _ranges(accept: str) -> Iterable[tuple[str, float]]:
    """(media range, q) pairs of an Accept header; a malformed q counts as 0."""
    for part in accept.split(","):
        media_range, *params = (piece.strip() for piece in part.split(";"))
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        yield media_range.lower(), quality


def negotiate_request(scope: MutableMapping[str, Any], accept: str | None) -> str | None:
    """Negotiate once per request and keep the choice in the scope for the later hooks."""
    chosen = negotiate(accept)
    scope[SCOPE_KEY] = chosen
    return chosen


def not_acceptable() -> Response:
    """406 when `Accept` names nothing we serve: the spec's recommended answer."""
    return PlainTextResponse(
        f"Not acceptable: send Accept: {GRAPHQL_RESPONSE} or {JSON} (or none).", status_code=406
    )


def no_graphiql() -> Response:
    """GET /graphql from a browser when GraphiQL is off (the production profile): 404 with a
    GraphQL error body saying how to query instead."""
    message = "GraphiQL is not served here: send queries by POST (or GET with ?query=)."
    error = {"message": message, "extensions": {"code": BadInput.code}}
    return Response(orjson.dumps({"errors": [error]}), status_code=404, media_type=JSON)


def is_request_error(result: ExecutionResult) -> bool:
    """Nothing executed: no data, and no error belongs to a field (field errors have a path)."""
    return (
        result.data is None
        and bool(result.errors)
        and all(error.path is None for error in result.errors or ())
    )


def error_status(errors: Iterable[GraphQLError]) -> int:
    codes = {(error.extensions or {}).get("code") for error in errors}
    return 500 if AppError.code in codes else 400


def shape_result(
    scope: MutableMapping[str, Any], result: ExecutionResult, body: GraphQLHTTPResponse
) -> GraphQLHTTPResponse:
    """Under GRAPHQL_RESPONSE a request error loses its `data` entry and gets a 4xx/5xx."""
    if scope.get(SCOPE_KEY) == GRAPHQL_RESPONSE and is_request_error(result):
        body.pop("data", None)
        scope[STATUS_KEY] = error_status(result.errors or ())
    return body


def finish(scope: MutableMapping[str, Any], response: Response) -> Response:
    """Set the negotiated Content-Type (and a request error's status) on a GraphQL answer."""
    if scope.get(SCOPE_KEY) != GRAPHQL_RESPONSE or response.media_type != JSON:
        return response
    response.headers["content-type"] = CONTENT_TYPES[GRAPHQL_RESPONSE]
    status = scope.get(STATUS_KEY)
    if status is not None:
        response.status_code = status
    return response


def request_error(scope: MutableMapping[str, Any], exc: HTTPException) -> Response:
    """A request refused before execution (not JSON, not an object, no query, batching):
    the HTTP status says so, and the body is a GraphQL response without `data` whose error
    has a code, in the negotiated media type (application/json clients included)."""
    error = {"message": exc.reason, "extensions": {"code": BadInput.code}}
    chosen = GRAPHQL_RESPONSE if scope.get(SCOPE_KEY) == GRAPHQL_RESPONSE else JSON
    return Response(
        orjson.dumps({"errors": [error]}),
        status_code=exc.status_code,
        media_type=CONTENT_TYPES[chosen],
    )
