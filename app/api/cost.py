"""What one GraphQL request may cost: a query cost limit checked before execution, read rate
limits, and text that PostgreSQL cannot store refused up front.

Cost (docs/decisions/0012-query-cost.md): every root field counts 1, and every field that
takes a `first` argument (a page) counts the product of its own `first` and the `first`s of
the pages it is nested in. So `user { posts(first: 100) { edges { node { author {
posts(first: 100) { ... } } } } } }` costs 1 + 100 + 100 x 100 = 10,101, and 20 aliases of
it 202,020. `first` is the literal in the document, else the argument's default (20); a
variable counts as the largest page (100), whatever its value, so the cost depends on the
document's text alone: the rule runs with graphql-core's validation, is cached with it, and a
trusted document is checked once at start-up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    StringValueNode,
    ValidationContext,
    ValidationRule,
    VariableNode,
    get_named_type,
    value_from_ast_untyped,
)
from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from app.api.context import Context
from app.api.resolvers import PAGE_MAX
from app.errors import BadInput
from app.observability.metrics import QUERY_COST_REFUSED
from app.ratelimit import read_budgets, read_meter

# Deep nesting multiplies pages past 2^64; the error's `cost` stays a JSON-safe integer.
JSON_SAFE_INT = 2**53 - 1

PAGE_ARGUMENT = "first"


def create_cost_rule(limit: int) -> type[ValidationRule]:
    """A rule class refusing operations that cost more than `limit`: build it once (the
    validation cache keys on rule classes)."""

    class QueryCostRule(ValidationRule):
        def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
            cost = operation_cost(self.context, node)
            if cost > limit:
                QUERY_COST_REFUSED.inc()
                self.report_error(
                    GraphQLError(
                        f"This query costs {cost:,}, over the limit of {limit:,}: ask for "
                        "smaller pages (`first`), fewer nested pages or fewer aliases.",
                        node,
                        extensions={
                            "code": BadInput.code,
                            "cost": min(cost, JSON_SAFE_INT),
                            "limit": limit,
                        },
                    )
                )

    return QueryCostRule


def operation_cost(context: ValidationContext, operation: OperationDefinitionNode) -> int:
    schema = context.schema
    root = schema.get_root_type(operation.operation)
    if root is None:
        return 0
    counter = _Counter(context, schema)
    # Every root field is a lookup of its own (aliases included), pages on top.
    roots = sum(1 for _ in counter.fields(root, operation.selection_set, frozenset()))
    return roots + counter.pages(root, operation.selection_set, 1, frozenset())


class _Counter:
    def __init__(self, context: ValidationContext, schema: GraphQLSchema) -> None:
        self.context = context
        self.schema = schema

    def fields(
        self, parent: GraphQLObjectType, selections: SelectionSetNode, seen: frozenset[str]
    ) -> Iterator[tuple[GraphQLObjectType, FieldNode]]:
        """The fields a selection set asks of `parent`, through fragments (cycles cut: the
        NoFragmentCycles rule reports them)."""
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                yield parent, selection
            elif isinstance(selection, InlineFragmentNode):
                yield from self.fields(
                    self._condition(parent, selection), selection.selection_set, seen
                )
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.context.get_fragment(name)
                if fragment is None or name in seen:
                    continue
                yield from self.fields(
                    self._condition(parent, fragment), fragment.selection_set, seen | {name}
                )

    def _condition(self, parent: GraphQLObjectType, node: Any) -> GraphQLObjectType:
        condition = getattr(node, "type_condition", None)
        if condition is None:
            return parent
        found = self.schema.get_type(condition.name.value)
        return found if isinstance(found, GraphQLObjectType) else parent

    def pages(
        self,
        parent: GraphQLObjectType,
        selections: SelectionSetNode,
        multiplier: int,
        seen: frozenset[str],
    ) -> int:
        total = 0
        for owner, node in self.fields(parent, selections, seen):
            definition = owner.fields.get(node.name.value)
            if definition is None or node.selection_set is None:
                continue
            inner = multiplier
            if PAGE_ARGUMENT in definition.args:
                inner = multiplier * _page_size(node, definition.args[PAGE_ARGUMENT].default_value)
                total += inner
            child = get_named_type(definition.type)
            if isinstance(child, GraphQLObjectType):
                total += self.pages(child, node.selection_set, inner, seen)
        return total


def _page_size(node: FieldNode, default: Any) -> int:
    for argument in node.arguments or ():
        if argument.name.value != PAGE_ARGUMENT:
            continue
        if isinstance(argument.value, VariableNode):
            return PAGE_MAX  # any value may come: count the largest page the API serves
        if isinstance(argument.value, IntValueNode):
            # A page over PAGE_MAX is refused when resolved: it costs at most the largest.
            return min(max(int(argument.value.value), 0), PAGE_MAX)
        value = value_from_ast_untyped(argument.value)
        return min(value, PAGE_MAX) if isinstance(value, int) and value >= 0 else PAGE_MAX
    return default if isinstance(default, int) else PAGE_MAX


class NoNulInText(ValidationRule):
    """A NUL character in a string literal: PostgreSQL's text cannot hold one."""

    def enter_string_value(self, node: StringValueNode, *_: Any) -> None:
        if "\x00" in node.value:
            self.report_error(GraphQLError(NUL_MESSAGE, node, extensions={"code": BadInput.code}))


NUL_MESSAGE = "Text may not contain NUL (\\u0000) characters."


def _has_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


class RequestLimits(SchemaExtension):
    """Per request, before execution: variables holding a NUL are refused (the document's
    literals are NoNulInText's), and a query over HTTP counts against the caller's read
    budgets (app.ratelimit: per user and per client IP)."""

    async def on_execute(self) -> Any:  # type: ignore[override]
        ctx = self.execution_context
        if ctx.variables and _has_nul(ctx.variables):
            raise BadInput(NUL_MESSAGE)
        context = ctx.context
        if isinstance(context, Context) and ctx.operation_type is OperationType.QUERY:
            limit_reads(context)
        yield


def limit_reads(context: Context) -> None:
    """One query against the client IP's read budget and, with a token, the user's (counted
    in process, sent to Redis in batches: app.ratelimit.ReadMeter)."""
    settings = context.state.settings
    budgets = read_budgets(
        context.client_ip(),
        context.viewer_id,
        settings.rate_limit_reads_per_ip_per_minute,
        settings.rate_limit_reads_per_minute,
    )
    read_meter.check(context.state.redis, budgets)


__all__ = [
    "NoNulInText",
    "RequestLimits",
    "create_cost_rule",
    "limit_reads",
    "operation_cost",
]
