"""The Strawberry schema: Query, Mutation and the error policy every response goes through."""

from __future__ import annotations

import logging

import strawberry
from graphql import ASTValidationRule, GraphQLError, NoSchemaIntrospectionCustomRule
from strawberry.exceptions import MissingQueryError
from strawberry.extensions import AddValidationRules, MaxTokensLimiter
from strawberry.types import ExecutionContext

from app.api.endpoint.subscriptions import Subscription
from app.api.fast.executor import EventScopedExecutor, FastExecutor
from app.api.schema.cost import NoNulInText, RequestLimits, create_cost_rule
from app.api.schema.mutations import Mutation
from app.api.schema.queries import Query
from app.api.schema.scalars import SCALAR_OVERRIDES
from app.api.transports.document_limits import (
    MAX_ALIASES,
    MAX_TOKENS,
    DocumentLimits,
    create_alias_rule,
    create_depth_rule,
)
from app.api.transports.hashing_fields import create_hashing_rule
from app.api.transports.persisted import LearnedDocuments
from app.api.transports.trusted import (
    DocumentParserCache,
    DocumentRegistry,
    DocumentValidationCache,
    RegisteredDocuments,
)
from app.api.upstream.strawberry import (
    CannotGetOperationTypeError,
    InvalidOperationTypeError,
    graphql_schema,
)
from app.config import Settings
from app.errors import AppError, BadInput, WrongRegion
from app.operation_documents import operations

log = logging.getLogger("app.api")

DOCUMENT_CACHE_SIZE = 256  # parsed and validated documents kept (module-level LRUs)
REQUEST_ERRORS = (CannotGetOperationTypeError, InvalidOperationTypeError, MissingQueryError)
INTERNAL_MESSAGE = "Something went wrong on our side; the request was not completed."


class FeedSchema(strawberry.Schema):
    documents: (
        DocumentRegistry  # the trusted documents (app.api.transports.trusted), set by build_schema
    )

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        """Give every error a public code; unexpected failures lose their message and trace."""
        for error in errors:
            original = error.original_error
            extensions = dict(error.extensions or {})
            if isinstance(original, AppError):
                extensions["code"] = original.code
                retry_after = getattr(original, "retry_after", None)
                if retry_after is not None:
                    extensions["retryAfter"] = retry_after  # seconds
                if isinstance(original, WrongRegion):
                    extensions["homeRegion"] = original.home_region
                    extensions["homeUrl"] = original.home_url
            elif original is None or isinstance(original, (GraphQLError, *REQUEST_ERRORS)):
                # Syntax, validation, variable coercion, depth or alias limits; over a
                # websocket also an unknown operationName or a missing query (HTTP answers
                # those 400 before execution, app.web).
                extensions.setdefault("code", BadInput.code)
            else:
                log.error("unhandled error in %s", error.path, exc_info=original)
                error.message = INTERNAL_MESSAGE
                error.original_error = None
                extensions = {"code": AppError.code}
            error.extensions = extensions


def build_schema(
    settings: Settings,
    subscription: type | None = Subscription,
    fast_execution: bool | None = None,
) -> FeedSchema:
    """The schema with the limits `settings` set. `fast_execution` (default: the
    FAST_EXECUTION setting) picks app.api.fast.executor's executor over graphql-core's
    per-field path; the answers are the same bytes."""
    fast = settings.fast_execution if fast_execution is None else fast_execution
    # The limit rules are built once: ValidationCache keys on the rule classes, and a class
    # made anew per request (as QueryDepthLimiter(...) in a factory does) never hits, which
    # cost a full validation of every request, 30-50% of the API's CPU.
    limits: list[type[ASTValidationRule]] = [
        # Linear in the document (app.api.transports.document_limits), unlike Strawberry's: a
        # fragment's depth and aliases are counted once, not at every spread (issue 19).
        create_depth_rule(settings.max_query_depth),
        create_alias_rule(MAX_ALIASES),
        create_cost_rule(settings.query_cost_limit),  # app.api.schema.cost; docs/decisions/0012
        # At most HASHING_FIELDS_PER_DOCUMENT signUp/logIn/changePassword per document.
        create_hashing_rule(settings.hashing_fields_per_document),
        NoNulInText,
    ]
    if settings.profile == "production":  # on every path: POST, GET, websocket (decision 0016)
        limits.append(NoSchemaIntrospectionCustomRule)
    learned = None
    if settings.apq_learn:  # Apollo's automatic persisted queries (transports.persisted)
        learned = LearnedDocuments(
            ttl_seconds=settings.apq_ttl_seconds,
            max_documents=settings.apq_max_documents,
            max_chars=settings.apq_max_document_chars,
            per_client_per_hour=settings.apq_learn_per_client_per_hour,
            process_entries=settings.apq_process_entries,
        )
    documents = DocumentRegistry(
        only_registered=settings.trusted_documents_only,
        learned=learned,
        refresh_seconds=settings.client_documents_refresh_seconds,
    )
    schema = FeedSchema(
        query=Query,
        mutation=Mutation,
        subscription=subscription,
        scalar_overrides=SCALAR_OVERRIDES,  # DateTime's description and @specifiedBy
        # Both keep EventScopedExecutor's subscription fix (a per-frame leak otherwise).
        execution_context_class=FastExecutor if fast else EventScopedExecutor,
        extensions=[
            # Factories: a fresh extension per request; the two caches are module-level LRUs.
            lambda: AddValidationRules(limits),
            lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
            RequestLimits,  # read budgets, NUL in variables: before execution (app.api.schema.cost)
            # A registered document skips the two caches (transports.trusted): first in line.
            lambda: RegisteredDocuments(documents),
            lambda: DocumentParserCache(maxsize=DOCUMENT_CACHE_SIZE),
            # Caps and the operation name, before validation (app.api.transports.document_limits).
            DocumentLimits,
            lambda: DocumentValidationCache(maxsize=DOCUMENT_CACHE_SIZE),
        ],
    )
    # Parsed and validated once here, with the same token limit and rules as a request.
    documents.register(graphql_schema(schema), operations(), limits, MAX_TOKENS)
    schema.documents = documents
    return schema
