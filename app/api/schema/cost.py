"""What one GraphQL request may cost: a query cost limit checked before execution, read rate
limits, and text that PostgreSQL cannot store refused up front.

Cost (docs/decisions/0012-query-cost.md) charges what the database pays, in rows: every
field that reads the database costs QUERY_COST for its SQL statement plus the rows it may
return. Such a field is a root field, a page (a field with a `first` argument) or a field
whose resolver takes `Info` (it reaches the request's DataLoaders: `Post.author`,
`Post.viewerHasLiked`, `User.viewerFollows`, `Comment.author`). The loaders batch a field's
loads for all its parents into one statement, so a field in the document is one statement
whatever the number of parents; its rows are its parents' number times its page (`first`)
or times 1. A page's `first` is the literal in the document, else the argument's default
(20); a variable counts as the largest page (100), whatever its value, so the cost depends
on the document's text alone: the rule runs with graphql-core's validation, is cached with
it, and a trusted document is checked once at start-up.

So `user { posts(first: 100) { edges { node { author { posts(first: 100) { ... } } } } } }`
costs (50 + 1) + (50 + 100) + (50 + 100) + (50 + 100 x 100) = 10,401, and 20 aliases of it
208,020. Each fragment's figure is computed once per document (per parent type), however
often it is spread: the rule is linear in the document's size (issue 19).
"""

from __future__ import annotations

import re
from typing import Any

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLField,
    GraphQLObjectType,
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

from app.api.schema.context import Context
from app.api.schema.resolvers import PAGE_MAX
from app.api.upstream.strawberry import GraphQLCoreConverter, OperationType
from app.errors import BadInput
from app.observability.metrics import QUERY_COST_REFUSED
from app.ratelimit import read_budgets, read_meter

# Deep nesting multiplies pages past 2^64; the error's `cost` stays a JSON-safe integer.
JSON_SAFE_INT = 2**53 - 1

PAGE_ARGUMENT = "first"
# One SQL statement costs PostgreSQL about as much as 50 rows of a page: a one-row batched
# read took 131-146 us, a row of 50 x 100-row batched pages 2.2-2.6 us (asyncpg, local
# PostgreSQL 16; docs/decisions/0012-query-cost.md).
QUERY_COST = 50

# (statements, rows) a selection set costs when read for one parent object.
Bill = tuple[int, int]


def create_cost_rule(limit: int) -> type[ValidationRule]:
    """A rule class refusing operations that cost more than `limit`: build it once (the
    validation cache keys on rule classes)."""

    class QueryCostRule(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            self.counter = _Counter(context)

        def enter_operation_definition(self, node: OperationDefinitionNode, *_: Any) -> None:
            cost = self.counter.operation_cost(node)
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
    """What one operation of a validated document costs (QUERY_COST per statement, plus
    rows)."""
    return _Counter(context).operation_cost(operation)


def reads_database(field: GraphQLField) -> bool:
    """A field whose resolver takes `Info` reaches the request's context (its DataLoaders):
    a statement per field of the document. Attribute fields and plain methods do not."""
    definition = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
    resolver = getattr(definition, "base_resolver", None)
    return resolver is not None and resolver.info_parameter is not None


class _Counter:
    """The bills of one document's selection sets; each fragment's computed once per parent
    type (and root or not), however often it is spread."""

    def __init__(self, context: ValidationContext) -> None:
        self.context = context
        self.schema = context.schema
        self.fragments: dict[tuple[str, str, bool], Bill] = {}
        self.running: set[tuple[str, str, bool]] = set()

    def operation_cost(self, operation: OperationDefinitionNode) -> int:
        root = self.schema.get_root_type(operation.operation)
        if root is None:
            return 0
        statements, rows = self.bill(root, operation.selection_set, root=True)
        return statements * QUERY_COST + rows

    def bill(self, parent: GraphQLObjectType, selections: SelectionSetNode, root: bool) -> Bill:
        """What `selections` cost read for one `parent`; at the root every field is a read."""
        statements = rows = 0
        for selection in selections.selections:
            if isinstance(selection, FieldNode):
                definition = parent.fields.get(selection.name.value)
                if definition is None:
                    continue  # a meta field, or unknown (FieldsOnCorrectType reports it)
                page = PAGE_ARGUMENT in definition.args
                size = (
                    _page_size(selection, definition.args[PAGE_ARGUMENT].default_value)
                    if page
                    else 1
                )
                if root or page or reads_database(definition):
                    statements += 1
                    rows += size
                child = get_named_type(definition.type)
                if selection.selection_set is not None and isinstance(child, GraphQLObjectType):
                    inner_statements, inner_rows = self.bill(child, selection.selection_set, False)
                    statements += inner_statements
                    rows += size * inner_rows
                continue
            if isinstance(selection, InlineFragmentNode):
                inner = self.bill(self._condition(parent, selection), selection.selection_set, root)
            else:
                assert isinstance(selection, FragmentSpreadNode)
                inner = self._fragment(parent, selection.name.value, root)
            statements += inner[0]
            rows += inner[1]
        return statements, rows

    def _fragment(self, parent: GraphQLObjectType, name: str, root: bool) -> Bill:
        fragment = self.context.get_fragment(name)
        if fragment is None:
            return 0, 0  # KnownFragmentNames reports it
        owner = self._condition(parent, fragment)
        key = (name, owner.name, root)
        found = self.fragments.get(key)
        if found is not None:
            return found
        if key in self.running:
            return 0, 0  # a cycle: NoFragmentCycles reports it
        self.running.add(key)
        try:
            bill = self.fragments[key] = self.bill(owner, fragment.selection_set, root)
        finally:
            self.running.discard(key)
        return bill

    def _condition(self, parent: GraphQLObjectType, node: Any) -> GraphQLObjectType:
        condition = getattr(node, "type_condition", None)
        if condition is None:
            return parent
        found = self.schema.get_type(condition.name.value)
        return found if isinstance(found, GraphQLObjectType) else parent


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
SURROGATE_MESSAGE = (
    "Text may not contain lone surrogates (\\ud800-\\udfff escapes not in a valid pair)."
)
# What JSON escapes can put in a str and no UTF-8 text can hold: the driver, the password
# hasher and the response's encoder would each fail on it (graphql-core's lexer refuses it
# in literals already).
_SURROGATE = re.compile("[\ud800-\udfff]")


def unstorable(value: str) -> str | None:
    """Why a variable's text cannot be stored or echoed (a NUL, a lone surrogate), or None."""
    if "\x00" in value:
        return NUL_MESSAGE
    return SURROGATE_MESSAGE if _SURROGATE.search(value) else None


def lone_surrogate_in(value: object) -> bool:
    """A lone surrogate anywhere in a decoded JSON value, keys included."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(lone_surrogate_in(k) or lone_surrogate_in(v) for k, v in value.items())
    if isinstance(value, list):
        return any(lone_surrogate_in(v) for v in value)
    return False


def _refusal(value: object) -> str | None:
    if isinstance(value, str):
        return unstorable(value)
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    else:
        return None
    return next((why for why in map(_refusal, items) if why), None)


class RequestLimits(SchemaExtension):
    """Per request, before execution: variables holding a NUL or a lone surrogate are
    refused (the document's literals are NoNulInText's and the lexer's), and a query over
    HTTP counts against the caller's read budgets (app.ratelimit: per user and per client
    IP)."""

    async def on_execute(self) -> Any:
        ctx = self.execution_context
        why = _refusal(ctx.variables) if ctx.variables else None
        if why:
            raise BadInput(why)
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
    read_meter.check(context.state.roles.limits, budgets)


__all__ = [
    "NoNulInText",
    "RequestLimits",
    "create_cost_rule",
    "limit_reads",
    "lone_surrogate_in",
    "operation_cost",
    "unstorable",
]
