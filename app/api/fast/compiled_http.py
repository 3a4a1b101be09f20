"""POST /graphql for a compiled document (app.api.fast.compiler), answered without the view.

Strawberry's view reads the body, builds request adapters, runs the schema's extension
hooks around parse/validate/execute and graphql-core's execution of ~300 fields: most of a
feed page's CPU once its data is in hand. A request this module recognises exactly (a JSON
POST naming a compiled document, by `documentId`, Apollo's persisted-query hash or its
exact text; variables that are plainly valid values of the operation's variable types; an
`Accept` we serve) runs the same steps in the same order here: the context with the token
checked (app.api.schema.context.http_context), the NUL and lone-surrogate check and the read budgets
(app.api.schema.cost), the root field's function, then the plan renders the body in the
negotiated media type (app.api.transports.http_media), with the status the regular path would give.

A document sent as text that is not registered gets the same treatment once it has been
planned (app.api.fast.text_plans' TextPlans: on its second sighting, bounded, the regular
path's parse, caps and validation first; decision 0045); until then, and when it cannot be
planned, it goes to the regular path.

Every other request (anything unusual at all, including what would be an error before
execution) goes to the regular path untouched, its body replayed: the regular path stays the
one place that judges malformed requests, so this module cannot refuse what it would
accept. So does a request whose page holds a value the plan cannot render (the compiler's
NotCompilable at run time): the regular path answers it from the start (its read is counted
twice against the read budgets, and the page read twice; graphql_compiled_fallback_total
counts these). Same bytes: tests/api/fast/test_compiled_documents.py.

Where it sits (app.web, decision 0052): with `path` given, as a middleware right inside
admission control, ahead of Starlette's exception middleware, router and route: a POST to
exactly that path that it answers costs no routing; everything else (other paths, other
methods, what it hands to the regular path) goes on down the stack, where the route's view
answers it as before. It then times the requests it answers itself into `latency` (the route
times the rest), so /graphql's latency histogram still counts each request once.

Its response goes out in one transport write under uvicorn (decision 0063): app.web puts
uvicorn's request cycle in the scope (RAW_RESPONSE_KEY) and app.api.upstream.uvicorn's
`write_response` writes the bytes uvicorn's two sends (head, then body) would, at once;
elsewhere, or when uvicorn's send must do more (writes paused, access log on), the two sends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from graphql import GraphQLError
from prometheus_client import Counter, Histogram
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.fast.plan import CompiledQuery, NotCompilable
from app.api.fast.text_plans import TEXT_LABEL, TextPlans
from app.api.schema.context import Context, http_context
from app.api.schema.cost import limit_reads, unstorable
from app.api.transports import http_media
from app.api.transports.admission import replay_body
from app.api.transports.route_path import route_path
from app.api.transports.trusted import DOCUMENT_ID_KEYS, DocumentRefused, DocumentRegistry
from app.api.upstream.uvicorn import write_response
from app.errors import AppError
from app.state import AppState

_KEYS = frozenset({"query", "variables", "operationName", "extensions", *DOCUMENT_ID_KEYS})
COMPILED = Counter(
    "graphql_compiled_total", "HTTP requests answered by a compiled document", ["operation"]
)
FALLBACK = Counter(
    "graphql_compiled_fallback_total",
    "Compiled requests answered by the regular path after all: a value the plan cannot render",
    ["operation"],
)
# uvicorn's request cycle (app.api.upstream.uvicorn.uvicorn_http_cycle), put in the scope by
# app.web.FeedApp: where it is, a response goes out in one transport write (write_response).
RAW_RESPONSE_KEY = "feed.raw_response"
_JSON_TYPES = frozenset({b"application/json", b"application/json; charset=utf-8"})


class CompiledHTTP:
    """In front of the GraphQL view: compiled documents here, everything else there."""

    def __init__(
        self,
        app: ASGIApp,
        state: Callable[[], AppState],
        documents: DocumentRegistry,
        compiled: Mapping[str, CompiledQuery],
        texts: TextPlans | None = None,
        path: str | None = None,
        latency: Histogram | None = None,
    ) -> None:
        self.app = app
        # As a middleware (see the module doc): only POSTs to this path, timed here.
        self.path = path
        self.latency = latency
        self.state = state
        self.documents = documents
        self.compiled = compiled
        # Unregistered texts (None or empty: registered documents only).
        self.texts = texts if texts is not None and texts.entries else None
        names = [q.entry.name for q in compiled.values()] + [TEXT_LABEL]
        self.answered = {name: COMPILED.labels(name) for name in names}
        self.content_types = {
            media: (b"content-type", value.encode())
            for media, value in http_media.CONTENT_TYPES.items()
        }
        self.fell_back = {name: FALLBACK.labels(name) for name in names}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            not (self.compiled or self.texts)
            or scope["type"] != "http"
            or scope["method"] != "POST"
            or (self.path is not None and route_path(scope) != self.path)
        ):
            await self.app(scope, receive, send)
            return
        if self.latency is None:
            await self._answer(scope, receive, send)
            return
        start = time.perf_counter()
        if await self._answer(scope, receive, send):
            self.latency.observe(time.perf_counter() - start)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Answers a POST: True when the plan did (or the client left), False when it was
        handed on to the regular path (`self.app`)."""
        content_type = accept = None
        for name, value in scope["headers"]:  # the first of each, as Starlette reads them
            if name == b"content-type" and content_type is None:
                content_type = value
            elif name == b"accept" and accept is None:
                accept = value
        media = http_media.negotiate(accept.decode("latin-1") if accept is not None else None)
        body = await _read_body(receive)
        if body is None:
            return True  # the client left before sending its body: nobody to answer
        planned = None
        if (
            content_type is not None
            and content_type.lower() in _JSON_TYPES
            and media is not None
            and (accept is None or b"multipart" not in accept)  # incremental delivery
        ):
            planned = self._plan(body)
        if planned is None:
            await self.app(scope, replay_body(body, receive), send)
            return False
        query, values = planned
        assert media is not None  # checked with the plan
        state = self.state()
        self.documents.keep_fresh(state.engine)  # clients' documents removed are noticed
        context = await http_context(state, Request(scope))
        try:
            result, status = await self._run(query, context, values, media)
        except NotCompilable:
            self.fell_back[query.entry.name].inc()
            await self.app(scope, replay_body(body, receive), send)
            return False
        self.answered[query.entry.name].inc()
        payload = orjson.dumps(result)
        headers = [(b"content-length", b"%d" % len(payload)), self.content_types[media]]
        cycle = scope.get(RAW_RESPONSE_KEY)
        if cycle is not None and write_response(cycle, status, headers, payload):
            return True  # one write: head and body together (decision 0063)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})
        return True

    def _plan(self, body: bytes) -> tuple[CompiledQuery, dict[str, Any]] | None:
        """The compiled query and coerced variables of a request it can answer, else None."""
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if type(data) is not dict or not data.keys() <= _KEYS:
            return None
        query = data.get("query")
        extensions = data.get("extensions")
        if (query is not None and type(query) is not str) or (
            extensions is not None and type(extensions) is not dict
        ):
            return None
        document_id = next((data[k] for k in DOCUMENT_ID_KEYS if data.get(k) is not None), None)
        try:
            text = self.documents.resolve(query, document_id, extensions)
        except DocumentRefused:
            return None
        if text is None or self.documents.learnable(query, extensions) is not None:
            return None  # a text to learn (APQ): the regular path runs and keeps it
        compiled = self.compiled.get(text)
        if compiled is None:
            if self.texts is None:
                return None
            if text in self.documents.by_text():
                return None  # one of the project's that the compiler cannot plan
            # A client's registered document or a learned one is planned at first sight.
            compiled = self.texts.get(text, known=self.documents.known(text))
            if compiled is None:
                return None
        name = data.get("operationName")
        if name is not None and name != compiled.operation_name:
            return None
        variables = data.get("variables")
        if variables is None:
            return compiled, {}
        if type(variables) is not dict or not variables.keys() <= compiled.variables.keys():
            return None
        values = {}
        for key, value in variables.items():
            if type(value) is str and unstorable(value):
                return None  # the regular path's NUL and lone-surrogate refusal
            try:
                values[key] = compiled.variables[key].coerce(value)
            except ValueError:
                return None
        return compiled, values

    async def _run(
        self, query: CompiledQuery, context: Context, values: dict[str, Any], media: str
    ) -> tuple[dict[str, Any], int]:
        try:
            limit_reads(context)  # as RequestLimits.on_execute
        except AppError as exc:
            # Refused before execution, as Strawberry reports an extension's error.
            error = GraphQLError(str(exc), original_error=exc)
            query.process_errors([error])
            if media == http_media.GRAPHQL_RESPONSE:
                return {"errors": [error.formatted]}, http_media.error_status([error])
            return {"data": None, "errors": [error.formatted]}, 200
        return await query.execute(context, values), 200


async def _read_body(receive: Receive) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
