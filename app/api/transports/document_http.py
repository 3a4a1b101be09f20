"""Trusted documents over HTTP: the request's document id (which Strawberry's parser drops)
and the two lists clients read, GET /graphql/documents.json (the project's operations) and
GET /graphql/client-documents.json (the clients' registered manifests). The registry itself:
app.api.transports.trusted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from cross_web import AsyncHTTPRequestAdapter
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from strawberry.http import GraphQLRequestData

from app.api.transports.trusted import (
    CLIENT_MANIFEST_PATH,
    DOCUMENT_ID_KEYS,
    MANIFEST_PATH,
    DocumentRegistry,
)


@dataclass
class DocumentRequestData(GraphQLRequestData):
    """Strawberry's request data with the body's (or query string's) `documentId`."""

    document_id: object = None


async def with_document_id(
    request: AsyncHTTPRequestAdapter, data: GraphQLRequestData
) -> GraphQLRequestData:
    """`data` plus the request's `documentId`, which Strawberry's parser drops. The JSON
    body is decoded again only when it mentions the field."""
    if request.method == "GET":
        params = request.query_params
        document_id: object = next(
            (params.get(k) for k in DOCUMENT_ID_KEYS if params.get(k) is not None), None
        )
    elif "application/json" in (request.content_type or ""):
        body = await request.get_body()  # Starlette keeps the body it read
        if not any(b'"%s"' % k.encode() in body for k in DOCUMENT_ID_KEYS):
            return data
        try:
            decoded: Any = orjson.loads(body)
        except orjson.JSONDecodeError:  # what Python's json accepts and orjson does not
            return data
        document_id = _document_id_in(decoded) if isinstance(decoded, dict) else None
    else:
        return data
    if document_id is None:
        return data
    return DocumentRequestData(
        query=data.query,
        variables=data.variables,
        operation_name=data.operation_name,
        extensions=data.extensions,
        protocol=data.protocol,
        document_id=document_id,
    )


def _document_id_in(body: dict[str, Any]) -> object:
    """The id a body names: `documentId`, else Relay's `doc_id`, else Relay's older `id`."""
    return next((body[k] for k in DOCUMENT_ID_KEYS if body.get(k) is not None), None)


def names_a_document(request: AsyncHTTPRequestAdapter) -> bool:
    """A GET naming a document by hash runs it (no `query`, but not a GraphiQL visit)."""
    params = request.query_params
    return (
        any(params.get(k) is not None for k in DOCUMENT_ID_KEYS)
        or params.get("extensions") is not None
    )


def manifest_route(registry: DocumentRegistry) -> Route:
    """GET /graphql/documents.json: operation name -> documentId, for clients (the demo)."""

    async def manifest(request: Request) -> Response:
        return Response(
            registry.manifest_json,
            media_type="application/json",
            headers={"cache-control": "no-cache"},
        )

    return Route(MANIFEST_PATH, manifest, methods=["GET"])


def client_manifest_route(registry: DocumentRegistry, engine: Callable[[], AsyncEngine]) -> Route:
    """GET /graphql/client-documents.json: the clients' registered documents, id -> name
    (app.documents registers them), as this process serves them (the table re-read first
    when it changed)."""

    async def manifest(request: Request) -> Response:
        await registry.refresh_clients(engine())
        return Response(
            registry.client_manifest_json,
            media_type="application/json",
            headers={"cache-control": "no-cache"},
        )

    return Route(CLIENT_MANIFEST_PATH, manifest, methods=["GET"])
