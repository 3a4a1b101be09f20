"""Trusted documents: the operations in graphql/operations/, registered by SHA-256.

At start-up (`build_schema`) every document `app.operation_documents.operations()` renders (the
exact text the demo and the tests send: one operation and the fragments it spreads) is
hashed, parsed once and validated once against the schema with the rules every request
gets. Then:

- a client may send the hash instead of the text: `documentId` ("sha256:<hex>" or the bare
  hex, the GraphQL-over-HTTP persisted-documents convention) or Apollo's
  `extensions.persistedQuery.sha256Hash`. An unknown hash answers PersistedQueryNotFound
  (Apollo clients then send the text); a hash sent with a text must be that text's.
- A registered document, sent by hash or as its exact text, skips parsing and validation
  (`RegisteredDocuments`, placed before `DocumentParserCache` and `DocumentValidationCache`,
  Strawberry's two caches taught to leave such a document alone).
- Any other text takes the full path (GraphiQL), unless TRUSTED_DOCUMENTS_ONLY refuses it.

The transports turn a request into the text to run with `DocumentRegistry.resolve`: HTTP in
app/web.py (`FeedGraphQL`), graphql-transport-ws in app/api/endpoint/websocket.py
(`handle_subscribe`).
`GET /graphql/documents.json` (`manifest_route`) maps each operation name to its documentId.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from cross_web import AsyncHTTPRequestAdapter
from graphql import (
    ASTValidationRule,
    DocumentNode,
    GraphQLError,
    GraphQLSchema,
    OperationDefinitionNode,
    parse,
)
from graphql import specified_rules as graphql_rules
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache
from strawberry.http import GraphQLRequestData

from app.api.transports.document_limits import measure, operation_name_error, shape_error
from app.api.upstream.strawberry import validate_document
from app.errors import BadInput, PersistedQueryNotFound
from app.operation_documents import DOCUMENT_ID_PREFIX, sha256_hex

PERSISTED_QUERY_NOT_FOUND = PersistedQueryNotFound.code  # Apollo's code and message
MANIFEST_PATH = "/graphql/documents.json"
ONLY_REGISTERED = (
    "Only registered documents are accepted here (TRUSTED_DOCUMENTS_ONLY): send the "
    f"documentId of one ({MANIFEST_PATH} lists them) or its exact text."
)
_HEX = re.compile(r"[0-9a-f]{64}")


class DocumentRefused(GraphQLError):
    """A request whose document cannot run; the transports send it as the one error."""


def _bad_input(message: str) -> DocumentRefused:
    return DocumentRefused(message, extensions={"code": BadInput.code})


def _not_found() -> DocumentRefused:
    return DocumentRefused("PersistedQueryNotFound", extensions={"code": PERSISTED_QUERY_NOT_FOUND})


@dataclass(frozen=True, slots=True)
class Registered:
    name: str
    text: str
    sha256: str  # hex
    document: DocumentNode  # parsed once; validated once against the schema


class DocumentRegistry:
    """The trusted documents of one schema, by hash and by text."""

    def __init__(self, *, only_registered: bool = False) -> None:
        self.only_registered = only_registered  # TRUSTED_DOCUMENTS_ONLY
        # The rules the documents were validated with: graphql's and the schema's limits, as
        # every request's ExecutionContext.validation_rules holds them.
        self.rules: tuple[type[ASTValidationRule], ...] = ()
        self._by_hash: dict[str, Registered] = {}
        self._by_text: dict[str, Registered] = {}
        self.manifest_json = b"{}"

    def register(
        self,
        schema: GraphQLSchema,
        documents: Mapping[str, str],
        limits: list[type[ASTValidationRule]],
        max_tokens: int,
    ) -> None:
        """Parse and validate each document (operation name -> text) as a request would be:
        the same token limit, graphql's rules plus `limits`. An invalid one stops start-up;
        one whose root type the schema lacks (a subscription without Subscription) is left
        out, since it could never run."""
        self.rules = (*graphql_rules, *limits)
        invalid: dict[str, list[str]] = {}
        for name, text in documents.items():
            document = parse(text, max_tokens=max_tokens)
            if not _runnable(schema, document):
                continue
            shape = measure(document)
            refused = shape_error(shape) or operation_name_error(shape, None)
            errors = [refused] if refused else validate_document(schema, document, self.rules)
            if errors:
                invalid[name] = [e.message for e in errors]
                continue
            entry = Registered(name, text, sha256_hex(text), document)
            self._by_hash[entry.sha256] = entry
            self._by_text[text] = entry
        if invalid:
            raise ValueError(f"operation documents that do not validate: {invalid}")
        manifest = {e.name: DOCUMENT_ID_PREFIX + e.sha256 for e in self._by_hash.values()}
        self.manifest_json = orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)

    def by_text(self) -> Mapping[str, Registered]:
        """Every registered document, by its exact text."""
        return self._by_text

    def lookup(self, text: str | None) -> Registered | None:
        """The registered document with exactly this text."""
        return None if text is None else self._by_text.get(text)

    def resolve(self, query: str | None, document_id: object, extensions: object) -> str | None:
        """The text to run for a request's `query`, `documentId` and `extensions` (None when
        it names no document: the transport's "no query" answer). Raises DocumentRefused."""
        wanted = _requested_hash(document_id, extensions)
        entry = self.lookup(query)
        if wanted is not None:
            if not query:  # None, or "" (graphql-ws clients must send a string)
                by_hash = self._by_hash.get(wanted)
                if by_hash is None:
                    raise _not_found()
                return by_hash.text
            actual = entry.sha256 if entry is not None else sha256_hex(query)
            if actual != wanted:
                raise _bad_input(
                    f"The hash sent ({wanted}) is not the SHA-256 of the query text ({actual})."
                )
        if query is not None and entry is None and self.only_registered:
            raise _bad_input(ONLY_REGISTERED)
        return query


def _runnable(schema: GraphQLSchema, document: DocumentNode) -> bool:
    return all(
        schema.get_root_type(d.operation) is not None
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode)
    )


def _hex_of(value: object, what: str) -> str:
    if isinstance(value, str):
        digest = value.removeprefix(DOCUMENT_ID_PREFIX).lower()
        if _HEX.fullmatch(digest):
            return digest
    raise _bad_input(f'{what} must be 64 hex digits of a SHA-256 ("sha256:<hex>" for documentId).')


def _requested_hash(document_id: object, extensions: object) -> str | None:
    """The hex hash a request names, from `documentId` or Apollo's persistedQuery."""
    hashes = set()
    if document_id is not None:
        hashes.add(_hex_of(document_id, "documentId"))
    persisted = extensions.get("persistedQuery") if isinstance(extensions, dict) else None
    if persisted is not None:
        if not isinstance(persisted, dict) or persisted.get("version") != 1:
            raise _bad_input("extensions.persistedQuery must be {version: 1, sha256Hash: <hex>}.")
        hashes.add(_hex_of(persisted.get("sha256Hash"), "persistedQuery.sha256Hash"))
    if len(hashes) > 1:
        raise _bad_input("documentId and extensions.persistedQuery name different documents.")
    return hashes.pop() if hashes else None


# -- the schema extensions -----------------------------------------------------------------


class RegisteredDocuments(SchemaExtension):
    """A registered text gets its start-up document, already validated: placed before the
    parser and validation caches, which then leave it alone (Strawberry's own parse and
    validation steps skip too: `graphql_document` is set, `pre_execution_errors` is not
    None). Under TRUSTED_DOCUMENTS_ONLY any other text is refused here too, whatever
    transport let it through."""

    def __init__(self, registry: DocumentRegistry) -> None:
        super().__init__()
        self.registry = registry
        self.entry: Registered | None = None

    def on_parse(self) -> Iterator[None]:
        context = self.execution_context
        if context.graphql_document is None:
            self.entry = self.registry.lookup(context.query)
            if self.entry is not None:
                context.graphql_document = self.entry.document
        yield

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        if context.pre_execution_errors is None:
            if self.entry is not None:
                # Validated at start-up, unless a request's rules differ from those.
                if tuple(context.validation_rules) == self.registry.rules:
                    context.pre_execution_errors = []
            elif self.registry.only_registered:
                context.pre_execution_errors = [_bad_input(ONLY_REGISTERED)]
        yield


class DocumentParserCache(ParserCache):
    """Strawberry's ParserCache, except for a document an earlier extension resolved, and
    for a text that does not parse: that one is left to Strawberry's own parse step, which
    reports the syntax error (or the token limit) as a request error on every transport.
    Raised from here, it escaped the websocket's operation as a bare `complete`."""

    def on_parse(self) -> Iterator[None]:
        context = self.execution_context
        if context.graphql_document is None and context.query:
            # On a syntax error Strawberry parses it again (up to the error) inside its checks.
            with contextlib.suppress(GraphQLError):
                context.graphql_document = self.cached_parse_document(
                    context.query, **context.parse_options
                )
        yield


class DocumentValidationCache(ValidationCache):
    """Strawberry's ValidationCache, except for a document already known valid (or refused)."""

    def on_validate(self) -> Iterator[None]:
        if self.execution_context.pre_execution_errors is not None:
            yield
        else:
            yield from super().on_validate()


# -- HTTP ----------------------------------------------------------------------------------


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
        document_id: object = request.query_params.get("documentId")
    elif "application/json" in (request.content_type or ""):
        body = await request.get_body()  # Starlette keeps the body it read
        if b'"documentId"' not in body:
            return data
        try:
            decoded: Any = orjson.loads(body)
        except orjson.JSONDecodeError:  # what Python's json accepts and orjson does not
            return data
        document_id = decoded.get("documentId") if isinstance(decoded, dict) else None
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


def names_a_document(request: AsyncHTTPRequestAdapter) -> bool:
    """A GET naming a document by hash runs it (no `query`, but not a GraphiQL visit)."""
    params = request.query_params
    return params.get("documentId") is not None or params.get("extensions") is not None


def manifest_route(registry: DocumentRegistry) -> Route:
    """GET /graphql/documents.json: operation name -> documentId, for clients (the demo)."""

    async def manifest(request: Request) -> Response:
        return Response(
            registry.manifest_json,
            media_type="application/json",
            headers={"cache-control": "no-cache"},
        )

    return Route(MANIFEST_PATH, manifest, methods=["GET"])
