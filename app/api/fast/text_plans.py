"""Plans for unregistered texts, made on demand and kept in a bounded LRU (decision 0045)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from graphql import ASTValidationRule, GraphQLError, GraphQLSchema, parse

from app.api.fast.compiler import ROOTS, _compile, unmirrored_extensions
from app.api.fast.plan import CompiledQuery, NotCompilable
from app.api.transports.document_limits import measure, operation_name_error, shape_error
from app.api.transports.trusted import Registered
from app.api.upstream.strawberry import validate_document

TEXT_LABEL = "(text)"  # the operation label of plans made from unregistered text
_SEEN = object()  # a text sighted once: planned if it comes again


class TextPlans:
    """Plans for documents sent as unregistered text (GraphiQL, ad-hoc clients), made once
    per distinct text and kept in a bounded LRU (decision 0045).

    A text is planned on its second sighting: the first is only remembered in a doorkeeper
    (a bounded LRU of texts seen once), so a client sending endless distinct texts costs one
    dictionary insert each and never evicts a plan. Planning does what the regular path does
    before execution, in its order: parse with the token limit (MaxTokensLimiter), the
    document caps and the operation-name rule (DocumentLimits), validation with the
    registered documents' rules (graphql's and the schema's limits); a text that fails any of
    them, or that the compiler cannot plan, is remembered as None (the regular path answers
    it, errors and all). Texts longer than `max_chars`, or naming no root this module plans,
    are never planned nor remembered. A schema with an extension this module does not
    mirror plans nothing, as compile_documents.
    """

    def __init__(
        self,
        schema: GraphQLSchema,
        rules: Sequence[type[ASTValidationRule]],
        max_tokens: int,
        process_errors: Callable[[list[GraphQLError]], None],
        entries: int,
        max_chars: int,
    ) -> None:
        self.schema = schema
        self.rules = tuple(rules)
        self.max_tokens = max_tokens
        self.process_errors = process_errors
        self.entries = entries if not unmirrored_extensions(schema) else 0
        self.max_chars = max_chars
        self._plans: OrderedDict[str, CompiledQuery | None] = OrderedDict()
        self._seen: OrderedDict[str, object] = OrderedDict()
        self.planned = 0  # texts planned (successfully or not): what the bound must keep low

    def __len__(self) -> int:
        return len(self._plans)

    def get(self, text: str, known: bool = False) -> CompiledQuery | None:
        """The plan of `text`, made on its second sighting (its first when `known`: a client's
        registered or a learned document); None: the regular path answers."""
        plans = self._plans
        try:
            plan = plans[text]
        except KeyError:
            pass
        else:
            plans.move_to_end(text)
            return plan
        if not self.entries or len(text) > self.max_chars:
            return None
        seen = self._seen
        if seen.pop(text, None) is None and not known:
            if not any(root in text for root in ROOTS):  # cannot be a plannable document
                return None
            seen[text] = _SEEN
            if len(seen) > self.entries:
                seen.popitem(last=False)
            return None
        plan = self._plan(text)
        plans[text] = plan
        if len(plans) > self.entries:
            plans.popitem(last=False)
        return plan

    def _plan(self, text: str) -> CompiledQuery | None:
        self.planned += 1
        try:
            document = parse(text, max_tokens=self.max_tokens)
        except GraphQLError:
            return None
        shape = measure(document)
        if shape_error(shape) or operation_name_error(shape, None):
            return None
        if validate_document(self.schema, document, self.rules):
            return None
        entry = Registered(TEXT_LABEL, text, "", document)
        try:
            return _compile(self.schema, entry, self.process_errors)
        except NotCompilable:
            return None
