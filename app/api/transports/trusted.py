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
- Clients' own documents, registered from their build's manifests (`python -m app.documents`,
  table client_documents, decision 0083), are served the same way by the clients' ids
  (`documentId`, Relay's `doc_id`/`id`, Apollo's hash): loaded into memory, re-read when the
  table changed (`refresh_clients`, `keep_fresh`), validated again when loaded.
- A text sent with Apollo's persistedQuery hash that ran is learned (Apollo's automatic
  persisted queries: app.api.transports.persisted, decision 0082), unless
  TRUSTED_DOCUMENTS_ONLY.

The transports turn a request into the text to run with `DocumentRegistry.resolve` (what this
process holds, no I/O: the compiled path) or `resolve_async` (the table and Redis too): HTTP in
app/api/endpoint/view.py (`FeedGraphQL`) and app.api.fast.compiled_http, graphql-transport-ws
in app/api/endpoint/websocket.py (`handle_subscribe`). The HTTP parts, documents.json
included: app.api.transports.document_http.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import orjson
from graphql import (
    ASTValidationRule,
    DocumentNode,
    GraphQLError,
    GraphQLSchema,
    OperationDefinitionNode,
    parse,
)
from graphql import specified_rules as graphql_rules
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from strawberry.extensions import ParserCache, SchemaExtension, ValidationCache

from app import client_documents
from app.api.transports.document_limits import measure, operation_name_error, shape_error
from app.api.transports.persisted import LearnedDocuments
from app.api.upstream.strawberry import validate_document
from app.client_documents import ID_PATTERN, ManifestDocument
from app.errors import AppError, BadInput, PersistedQueryNotFound
from app.operation_documents import DOCUMENT_ID_PREFIX, sha256_hex
from app.redis_scripts import AnyRedis

log = logging.getLogger("app.api")

PERSISTED_QUERY_NOT_FOUND = PersistedQueryNotFound.code  # Apollo's code and message
MANIFEST_PATH = "/graphql/documents.json"
CLIENT_MANIFEST_PATH = "/graphql/client-documents.json"
ONLY_REGISTERED = (
    "Only registered documents are accepted here (TRUSTED_DOCUMENTS_ONLY): send the "
    f"documentId of one ({MANIFEST_PATH} lists them) or its exact text."
)
_HEX = re.compile(r"[0-9a-f]{64}")
# Where a request names a document by id: the GraphQL-over-HTTP field, then Relay's two.
DOCUMENT_ID_KEYS = ("documentId", "doc_id", "id")


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
    """The trusted documents of one schema, by hash and by text: the project's operations
    (start-up), the clients' registered manifests (app.client_documents, re-read from
    PostgreSQL when they changed) and, unless only registered documents run, the texts
    learned from Apollo's automatic persisted queries (app.api.transports.persisted)."""

    def __init__(
        self,
        *,
        only_registered: bool = False,
        learned: LearnedDocuments | None = None,
        refresh_seconds: float = 1.0,
    ) -> None:
        self.only_registered = only_registered  # TRUSTED_DOCUMENTS_ONLY
        # Learning is off when only registered documents run (nothing learned could run).
        self.learned = None if only_registered else learned
        # The rules the documents were validated with: graphql's and the schema's limits, as
        # every request's ExecutionContext.validation_rules holds them.
        self.rules: tuple[type[ASTValidationRule], ...] = ()
        self._schema: GraphQLSchema | None = None
        self._max_tokens = 0
        self._by_hash: dict[str, Registered] = {}
        self._by_text: dict[str, Registered] = {}
        self.manifest_json = b"{}"
        # Clients' manifests: id -> entry, text -> entry; swapped whole on a reload.
        self._clients: dict[str, Registered] = {}
        self._client_texts: dict[str, Registered] = {}
        self.client_manifest_json = b"{}"
        self.refresh_seconds = refresh_seconds
        self._client_version: client_documents.Version | None = None
        self._client_checked = -float("inf")  # monotonic s of the last look at the table
        self._refreshing: asyncio.Lock | None = None
        self._refresh_task: asyncio.Task[bool] | None = None

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
        self._schema = schema
        self._max_tokens = max_tokens
        invalid: dict[str, list[str]] = {}
        for name, text in documents.items():
            document = parse(text, max_tokens=max_tokens)
            if not _runnable(schema, document):
                continue
            errors = self._errors(document)
            if errors:
                invalid[name] = errors
                continue
            entry = Registered(name, text, sha256_hex(text), document)
            self._by_hash[entry.sha256] = entry
            self._by_text[text] = entry
        if invalid:
            raise ValueError(f"operation documents that do not validate: {invalid}")
        manifest = {e.name: DOCUMENT_ID_PREFIX + e.sha256 for e in self._by_hash.values()}
        self.manifest_json = orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)

    def _errors(self, document: DocumentNode) -> list[str]:
        assert self._schema is not None
        shape = measure(document)
        refused = shape_error(shape) or operation_name_error(shape, None)
        errors = [refused] if refused else validate_document(self._schema, document, self.rules)
        return [e.message for e in errors]

    def check(self, text: str) -> tuple[DocumentNode | None, list[str]]:
        """`text` parsed and validated as a request's would be (token limit, caps, graphql's
        rules, the depth, alias and cost rules): the document, or None and why not."""
        assert self._schema is not None, "register() first"
        try:
            document = parse(text, max_tokens=self._max_tokens)
        except GraphQLError as exc:
            return None, [exc.message]
        if not _runnable(self._schema, document):
            return None, ["an operation type this schema does not serve"]
        errors = self._errors(document)
        return (None, errors) if errors else (document, [])

    def load_clients(self, documents: Sequence[ManifestDocument]) -> list[str]:
        """Serve these client documents (replacing the ones before): each checked again
        against this schema; the ids of those that no longer validate (left out, logged)."""
        by_id: dict[str, Registered] = {}
        by_text: dict[str, Registered] = {}
        dropped = []
        for doc in documents:
            document, errors = self.check(doc.body)
            if document is None:
                log.warning("client document %s no longer validates: %s", doc.id, errors)
                dropped.append(doc.id)
                continue
            entry = Registered(doc.name or doc.id, doc.body, sha256_hex(doc.body), document)
            by_id[doc.id] = entry
            by_text[doc.body] = entry
        self._clients, self._client_texts = by_id, by_text
        manifest = {key: entry.name for key, entry in by_id.items()}
        self.client_manifest_json = orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS)
        return dropped

    async def refresh_clients(self, engine: AsyncEngine, force: bool = False) -> bool:
        """Re-read the clients' documents if the table changed, at most once per
        `refresh_seconds` (a flood of unknown ids costs one small query a period): True
        when something new may be served."""
        now = time.monotonic()
        if not force and now - self._client_checked < self.refresh_seconds:
            return False
        if self._refreshing is None:
            self._refreshing = asyncio.Lock()
        async with self._refreshing:
            if not force and now - self._client_checked < self.refresh_seconds:
                return False  # another request looked meanwhile
            self._client_checked = time.monotonic()
            try:
                version = await client_documents.version(engine)
                if version == self._client_version:
                    return False
                loaded = await client_documents.load(engine)
            except (SQLAlchemyError, OSError, AppError):  # unreachable: serve what we hold
                log.warning("client documents: the table could not be read", exc_info=True)
                return False
            self.load_clients(loaded)
            self._client_version = version
            return True

    def keep_fresh(self, engine: AsyncEngine) -> None:
        """While client documents are served, look at the table in the background once per
        `refresh_seconds`, so one removed (or replaced) stops being served within about that
        (a miss looks at once: `resolve_async`)."""
        if not self._clients or time.monotonic() - self._client_checked < self.refresh_seconds:
            return
        if self._refresh_task is not None and not self._refresh_task.done():
            return
        self._refresh_task = asyncio.get_running_loop().create_task(self.refresh_clients(engine))

    def by_text(self) -> Mapping[str, Registered]:
        """Every registered operation of the project, by its exact text."""
        return self._by_text

    def lookup(self, text: str | None) -> Registered | None:
        """The registered document (the project's or a client's) with exactly this text."""
        if text is None:
            return None
        return self._by_text.get(text) or self._client_texts.get(text)

    def known(self, text: str) -> bool:
        """Registered, or learned by this process: valid, worth planning at first sight."""
        learned = self.learned
        return self.lookup(text) is not None or (learned is not None and learned.holds_text(text))

    def resolve(self, query: str | None, document_id: object, extensions: object) -> str | None:
        """The text to run for a request's `query`, `documentId` and `extensions` (None when
        it names no document: the transport's "no query" answer), from what this process
        holds (no I/O). Raises DocumentRefused."""
        wanted = _requested_id(document_id, extensions)
        entry = self.lookup(query)
        if wanted is not None:
            if not query:  # None, or "" (graphql-ws clients must send a string)
                text = self._held(wanted)
                if text is None:
                    raise _not_found()
                return text
            client = self._clients.get(wanted)
            if client is not None:
                if client.text != query:
                    raise _bad_input(f"The text sent is not the one registered as {wanted}.")
            elif not _HEX.fullmatch(wanted):
                raise _bad_input(f"No document is registered as {wanted} to compare the text to.")
            else:
                actual = entry.sha256 if entry is not None else sha256_hex(query)
                if actual != wanted:
                    raise _bad_input(
                        f"The hash sent ({wanted}) is not the SHA-256 of the query text ({actual})."
                    )
        if query is not None and entry is None and self.only_registered:
            raise _bad_input(ONLY_REGISTERED)
        return query

    def _held(self, wanted: str) -> str | None:
        entry = self._by_hash.get(wanted) or self._clients.get(wanted)
        if entry is not None:
            return entry.text
        if self.learned is not None and _HEX.fullmatch(wanted):
            return self.learned.local(wanted)
        return None

    async def resolve_async(
        self,
        query: str | None,
        document_id: object,
        extensions: object,
        engine: AsyncEngine,
        redis: AnyRedis,
    ) -> str | None:
        """`resolve`, looking further when this process does not hold the document: the
        clients' table (changed since it was read?), then the learned store in Redis."""
        self.keep_fresh(engine)
        try:
            return self.resolve(query, document_id, extensions)
        except DocumentRefused as refused:
            code = (refused.extensions or {}).get("code")
            unknown_text = refused.message == ONLY_REGISTERED or "No document is registered" in (
                refused.message
            )
            if code != PERSISTED_QUERY_NOT_FOUND and not unknown_text:
                raise
            if await self.refresh_clients(engine):
                with contextlib.suppress(DocumentRefused):
                    return self.resolve(query, document_id, extensions)
            wanted = _requested_id(document_id, extensions)
            learned = self.learned
            if code == PERSISTED_QUERY_NOT_FOUND and learned is not None and wanted:
                text = await learned.lookup(redis, wanted) if _HEX.fullmatch(wanted) else None
                if text is not None:
                    return text
            raise refused

    def learnable(self, query: str | None, extensions: object) -> str | None:
        """The hash under which this request's text would be learned (Apollo's
        persistedQuery with a text this process neither registered nor learned), else None."""
        if self.learned is None or not query:
            return None
        persisted = extensions.get("persistedQuery") if isinstance(extensions, dict) else None
        if not isinstance(persisted, dict):
            return None
        sha256 = persisted.get("sha256Hash")
        if not isinstance(sha256, str) or sha256 in self._by_hash or self.known(query):
            return None
        return sha256

    async def learn(
        self, query: str, extensions: object, ran: bool, who: str, redis: AnyRedis, limits: AnyRedis
    ) -> bool:
        """After a request ran: keep its text by its hash when it is learnable and it ran
        (`ran`: the answer has data, so it parsed, validated and passed the cost rule)."""
        sha256 = self.learnable(query, extensions)
        if sha256 is None or not ran or self.learned is None:
            return False
        if sha256_hex(query) != sha256:  # resolve refused it already; never keep a mismatch
            return False
        return await self.learned.learn(redis, limits, sha256, query, who)


def _runnable(schema: GraphQLSchema, document: DocumentNode) -> bool:
    return all(
        schema.get_root_type(d.operation) is not None
        for d in document.definitions
        if isinstance(d, OperationDefinitionNode)
    )


def _id_of(value: object, what: str) -> str:
    """A requested id: a SHA-256 hex (lower-cased; "sha256:" prefixed or bare), or for a
    `documentId` a client's own registered id (Relay's md5, any manifest id)."""
    if isinstance(value, str):
        if value.startswith(DOCUMENT_ID_PREFIX) or what != "documentId":
            digest = value.removeprefix(DOCUMENT_ID_PREFIX).lower()
            if _HEX.fullmatch(digest):
                return digest
        elif _HEX.fullmatch(value.lower()):
            return value.lower()
        elif ID_PATTERN.fullmatch(value):
            return value
    raise _bad_input(
        f'{what} must be 64 hex digits of a SHA-256 ("sha256:<hex>" for documentId) '
        "or the id of a registered client document."
    )


def _requested_id(document_id: object, extensions: object) -> str | None:
    """The id a request names, from `documentId` or Apollo's persistedQuery."""
    ids = set()
    if document_id is not None:
        ids.add(_id_of(document_id, "documentId"))
    persisted = extensions.get("persistedQuery") if isinstance(extensions, dict) else None
    if persisted is not None:
        if not isinstance(persisted, dict) or persisted.get("version") != 1:
            raise _bad_input("extensions.persistedQuery must be {version: 1, sha256Hash: <hex>}.")
        ids.add(_id_of(persisted.get("sha256Hash"), "persistedQuery.sha256Hash"))
    if len(ids) > 1:
        raise _bad_input("documentId and extensions.persistedQuery name different documents.")
    return ids.pop() if ids else None


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
