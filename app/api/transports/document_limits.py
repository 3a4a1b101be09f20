"""What one GraphQL document may hold, checked in time linear in its size (issue 19).

A document is text from anyone, parsed and validated on the event loop: every step before
execution must cost little and a bounded amount. Three parts:

- **Caps before validation** (`DocumentLimits`, a schema extension placed after the trusted
  documents, so a registered document skips it): tokens (MAX_TOKENS, counted by graphql-core's
  parser: Strawberry's MaxTokensLimiter), definitions (operations and fragments), fragment
  spreads, and how often one response key occurs in one selection set. The last is
  graphql-core's OverlappingFieldsCanBeMerged, which compares every pair of fields with the
  same key: 450 copies of `viewer { id }` (6 KB) took 1 s to validate. Past a cap the
  document is refused, BAD_USER_INPUT naming the limit, and nothing else runs.
- **One operation, or its name**: a document with several operations and no
  `operationName` is refused as the GraphQL spec and graphql-core refuse it (Strawberry would
  run the first one), on every transport, since all of them go through this extension.
- **Linear depth and alias rules** (`create_depth_rule`, `create_alias_rule`) in place of
  Strawberry's, which walk a fragment again at every spread: fragments that spread the next
  one twice, 22 levels deep (1 KB), meant 2^22 walks. Here each fragment's figure is
  computed once per document (`FragmentMemo`); the query cost rule (app.api.schema.cost) does the
  same. Same verdicts and messages as Strawberry's rules.

Measured figures and the choice of caps: docs/decisions/0015-document-limits.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, TypeVar

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
)
from strawberry.extensions import SchemaExtension

from app.api.transports.constants import (
    MAX_ALIASES,
    MAX_DEFINITIONS,
    MAX_FIELD_REPEATS,
    MAX_FRAGMENT_SPREADS,
)
from app.api.transports.constants import MAX_TOKENS as MAX_TOKENS
from app.errors import BadInput

MULTIPLE_OPERATIONS = "Must provide operation name if query contains multiple operations."

T = TypeVar("T")


# -- the caps before validation --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DocumentShape:
    operations: int
    definitions: int
    spreads: int
    repeated_key: str  # the response key occurring most often in one selection set
    repeats: int  # how often it occurs there


@lru_cache(maxsize=256)
def measure(document: DocumentNode) -> DocumentShape:
    """One pass over the document's selection sets, without recursion. A parsed document
    is hashed by identity and the parser cache hands out the same object for the same
    text, so a repeated document is measured once."""
    operations = spreads = repeats = 0
    repeated_key = ""
    stack: list[SelectionSetNode] = []
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            operations += 1
        selection_set = getattr(definition, "selection_set", None)
        if selection_set is not None:
            stack.append(selection_set)
    while stack:
        keys: Counter[str] = Counter()
        pending = [stack.pop()]  # one selection set with its inline fragments, flattened
        while pending:
            for selection in pending.pop().selections:
                if isinstance(selection, FieldNode):
                    keys[(selection.alias or selection.name).value] += 1
                    if selection.selection_set is not None:
                        stack.append(selection.selection_set)
                elif isinstance(selection, InlineFragmentNode):
                    pending.append(selection.selection_set)
                elif isinstance(selection, FragmentSpreadNode):
                    spreads += 1
        if keys:
            key, count = keys.most_common(1)[0]
            if count > repeats:
                repeated_key, repeats = key, count
    return DocumentShape(operations, len(document.definitions), spreads, repeated_key, repeats)


def _refusal(message: str, limit: int) -> GraphQLError:
    return GraphQLError(message, extensions={"code": BadInput.code, "limit": limit})


def shape_error(shape: DocumentShape) -> GraphQLError | None:
    """The first cap a document's shape passes, as the error a client gets."""
    if shape.definitions > MAX_DEFINITIONS:
        return _refusal(
            f"This document has {shape.definitions} definitions (operations and fragments), "
            f"over the limit of {MAX_DEFINITIONS}: send only the operation you run and the "
            "fragments it spreads.",
            MAX_DEFINITIONS,
        )
    if shape.spreads > MAX_FRAGMENT_SPREADS:
        return _refusal(
            f"This document spreads fragments {shape.spreads} times, over the limit of "
            f"{MAX_FRAGMENT_SPREADS}.",
            MAX_FRAGMENT_SPREADS,
        )
    if shape.repeats > MAX_FIELD_REPEATS:
        return _refusal(
            f"The field '{shape.repeated_key}' occurs {shape.repeats} times in one selection "
            f"set, over the limit of {MAX_FIELD_REPEATS}: select it once.",
            MAX_FIELD_REPEATS,
        )
    return None


def operation_name_error(shape: DocumentShape, operation_name: str | None) -> GraphQLError | None:
    """graphql-core's refusal of a document whose operation to run is not named."""
    if operation_name is None and shape.operations > 1:
        return GraphQLError(MULTIPLE_OPERATIONS, extensions={"code": BadInput.code})
    return None


class DocumentLimits(SchemaExtension):
    """Before validation, for a document that is not a registered one: the caps, then the
    operation name. A refusal becomes the request's one error (validation is skipped), the
    way every transport reports a validation error."""

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        if context.pre_execution_errors is None and document is not None:
            shape = measure(document)
            # Strawberry's ExecutionContext answers the first operation's name when none
            # was sent; what the client sent is kept here (tests/api/fast/test_fast_execution.py
            # fails if a Strawberry upgrade moves it).
            sent = getattr(context, "_provided_operation_name", context.operation_name)
            error = shape_error(shape) or operation_name_error(shape, sent)
            if error is not None:
                context.pre_execution_errors = [error]
        yield


# -- linear depth and alias rules ------------------------------------------------------------


class FragmentMemo(Generic[T]):
    """A figure of each fragment of one document, computed once by `compute(fragment)`. A
    spread that closes a cycle counts `empty` (graphql-core's NoFragmentCycles reports the
    cycle); so does an unknown fragment (KnownFragmentNames reports it)."""

    def __init__(
        self,
        context: ValidationContext,
        compute: Callable[[FragmentDefinitionNode], T],
        empty: T,
    ) -> None:
        self.context = context
        self.compute = compute
        self.empty = empty
        self.known: dict[str, T] = {}
        self.running: set[str] = set()

    def __call__(self, name: str) -> T:
        found = self.known.get(name)
        if found is not None:
            return found
        fragment = self.context.get_fragment(name)
        if fragment is None or name in self.running:
            return self.empty
        self.running.add(name)
        try:
            value = self.known[name] = self.compute(fragment)
        finally:
            self.running.discard(name)
        return value


def _is_introspection(name: str) -> bool:
    return name.startswith("__")


def create_depth_rule(max_depth: int) -> type[ValidationRule]:
    """Strawberry's QueryDepthLimiter verdict and message, linear: a field with a selection
    counts 1 plus its deepest child (introspection fields and leaves 0), a fragment spread
    its fragment's depth. Build it once (the validation cache keys on rule classes)."""

    class DepthRule(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            self.fragment_depth = FragmentMemo(
                context, lambda fragment: self.depth(fragment.selection_set), 0
            )

        def depth(self, selection_set: SelectionSetNode) -> int:
            deepest = 0
            for selection in selection_set.selections:
                if isinstance(selection, FieldNode):
                    inner = selection.selection_set
                    if inner is None or _is_introspection(selection.name.value):
                        continue
                    depth = 1 + self.depth(inner)
                elif isinstance(selection, InlineFragmentNode):
                    depth = self.depth(selection.selection_set)
                else:
                    assert isinstance(selection, FragmentSpreadNode)
                    depth = self.fragment_depth(selection.name.value)
                deepest = max(deepest, depth)
            return deepest

        def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
            if self.depth(node.selection_set) > max_depth:
                name = node.name.value if node.name else "anonymous"
                self.report_error(
                    GraphQLError(f"'{name}' exceeds maximum operation depth of {max_depth}", node)
                )

    return DepthRule


def create_alias_rule(max_aliases: int) -> type[ValidationRule]:
    """Strawberry's MaxAliasesLimiter verdict and message, linear: every aliased field in the
    document's operations, a fragment's counted at each spread of it."""

    class AliasRule(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            self.total = 0
            self.fragment_aliases = FragmentMemo(
                context, lambda fragment: self.aliases(fragment.selection_set), 0
            )

        def aliases(self, selection_set: SelectionSetNode) -> int:
            count = 0
            for selection in selection_set.selections:
                if isinstance(selection, FieldNode):
                    count += selection.alias is not None
                    if selection.selection_set is not None:
                        count += self.aliases(selection.selection_set)
                elif isinstance(selection, InlineFragmentNode):
                    count += self.aliases(selection.selection_set)
                else:
                    assert isinstance(selection, FragmentSpreadNode)
                    count += self.fragment_aliases(selection.name.value)
            return count

        def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
            self.total += self.aliases(node.selection_set)

        def leave_document(self, *_: Any) -> None:
            if self.total > max_aliases:
                self.report_error(
                    GraphQLError(f"{self.total} aliases found. Allowed: {max_aliases}")
                )

    return AliasRule


__all__ = [
    "MAX_ALIASES",
    "MAX_DEFINITIONS",
    "MAX_FIELD_REPEATS",
    "MAX_FRAGMENT_SPREADS",
    "MAX_TOKENS",
    "DocumentLimits",
    "DocumentShape",
    "FragmentMemo",
    "create_alias_rule",
    "create_depth_rule",
    "measure",
    "operation_name_error",
    "shape_error",
]
