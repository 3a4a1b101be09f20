"""Registered documents compiled to direct code: the feed without graphql-core or the view.

A registered document (transports.trusted) is known at start-up, so its whole selection can be
planned once: which attribute each response key reads, how each leaf serializes. When every
field of a registered query is one this module can plan, `compile_documents` makes a
`CompiledQuery` of it (and `TextPlans` does the same, on demand and bounded, for a text sent
twice that is not registered), and app.api.fast.compiled_http answers such a request over HTTP with
the root field's value rendered straight to JSON: no request parsing by Strawberry's view,
no graphql-core execution context, no per-field Path/Info/resolver wrapper. What is planned:

- the root field: `feed` only (ROOTS), its arguments from literals or variables;
- `__typename`; Strawberry *basic* fields (attribute reads, app.api.fast.executor's
  `classify_field`) of leaf types (through the leaf type's own output coercion), of object
  types and of lists of them;
- resolver fields whose type declares how a page's `extras` answer them (app.api.schema.types,
  `PAGE_EXTRAS`: today `Post.author` and `Post.viewerHasLiked`, the authors and the
  viewer's likes read with the page's rows); what a page did not hold is loaded through the
  request's DataLoaders first (app.api.schema.feed.complete_page_extras).

Anything else (other fields, directives, arguments below the root, abstract types, a
response key used twice, a document with more than one operation) leaves the document to
the regular path, as do requests whose variables are not plainly valid
(app.api.fast.compiled_http), and, at run time, a value the plan cannot render (a null in a
non-null field, a leaf its scalar rejects, an author the page lacks): `execute` raises
`NotCompilable` and the request is answered by the regular path instead. So nothing is
refused here that graphql-core would accept. Values are read from this request's objects
only: nothing is cached across requests but the plans.

A `feed` plan whose every selected field has a row read (app.api.schema.feed's ROW_READS)
also gets a row plan (`RowPlan`, decision 0058), which `execute` prefers: the root's value
as FeedRows (each edge a (cursor, FeedRow) pair) and a render generated to read each field
from the rows, so no PostEdge, Post, User or FeedPost is built per post; the same leaf
completions and NotCompilable cases (tests/api/test_compiled_rows.py holds both renders
byte-equal).

The schema's extensions are mirrored by name (MIRRORED_EXTENSIONS): a schema with one this
module does not know compiles nothing.

The bytes are the regular path's: tests/api/test_compiled_documents.py runs random feeds and
documents through both and compares the responses, including errors.
"""

from __future__ import annotations

import enum
import keyword
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphql import (
    ASTValidationRule,
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLBoolean,
    GraphQLEnumType,
    GraphQLError,
    GraphQLID,
    GraphQLInt,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    GraphQLString,
    InlineFragmentNode,
    ListTypeNode,
    NamedTypeNode,
    NonNullTypeNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    ValueNode,
    VariableNode,
    located_error,
    parse,
    value_from_ast_untyped,
)
from graphql.language import EnumValueNode
from strawberry.schema.schema import validate_document

from app.api.fast.adapter import (
    STRAWBERRY_ISOFORMAT,
    Undefined,
    enum_class,
    strawberry_field,
    strawberry_schema,
)
from app.api.fast.executor import (
    LEAF,
    LIST,
    MISS,
    OBJECT,
    TYPENAME,
    classify_field,
    completion,
)
from app.api.schema.context import Context
from app.api.schema.feed import (
    ROW_READS,
    RowRead,
    complete_page_extras,
    complete_row_extras,
    feed_connection,
    feed_rows,
)
from app.api.schema.types import PAGE_EXTRAS
from app.api.transports.document_limits import measure, operation_name_error, shape_error
from app.api.transports.trusted import Registered

log = logging.getLogger("app.api")

EXTRAS = 10  # a field read from the page's extras (its type's PAGE_EXTRAS declaration)

RootResolver = Callable[..., Awaitable[Any]]
# Root fields a compiled document may select: the function the field's resolver calls.
ROOTS: dict[str, RootResolver] = {"feed": feed_connection}

# The schema's extensions (app.api.endpoint.schema.build_schema), by class name, and what a compiled
# request does in their place. A schema with any other extension compiles nothing: a new
# extension must be added here, with its counterpart, before compiled documents come back
# (tests/api/test_compiled_documents.py compares this list with the schema's).
MIRRORED_EXTENSIONS: Mapping[str, str] = {
    "AddValidationRules": "registered documents are validated at start-up, same rules; "
    "a text when TextPlans plans it",
    "MaxTokensLimiter": "registered documents are parsed at start-up, same token limit; "
    "a text when TextPlans plans it",
    "RequestLimits": "CompiledHTTP calls limit_reads before the root field; a NUL or a lone "
    "surrogate in a variable goes to the regular path",
    "RegisteredDocuments": "CompiledHTTP finds the document with DocumentRegistry.resolve",
    "DocumentParserCache": "registered documents are parsed at start-up, a text once by TextPlans",
    "DocumentLimits": "caps checked at registration (TextPlans: when planning); the "
    "operation name must match the plan's",
    "DocumentValidationCache": "registered documents are validated at start-up, a text once "
    "by TextPlans",
}


class NotCompilable(Exception):
    """A document (or a value at run time) this module does not handle."""


def extension_names(schema: Any) -> list[str]:
    """The class names of a Strawberry schema's extensions (factories are called once)."""
    names = []
    for extension in schema.extensions:
        if isinstance(extension, type):
            names.append(extension.__name__)
        elif callable(extension) and not hasattr(extension, "on_operation"):
            names.append(type(extension()).__name__)
        else:
            names.append(type(extension).__name__)
    return names


@dataclass(frozen=True, slots=True)
class Step:
    key: str  # response key
    kind: int
    attribute: str  # the Python attribute read (basic fields)
    non_null: bool
    complete: Any  # a leaf's completion; an object's or a list item's steps
    type_name: str  # the parent type's name (__typename)
    # A leaf of graphql-core's own String, ID or Boolean: a value of exactly this Python
    # type is its own serialization (serialize_string/_id/_boolean return it unchanged),
    # so it skips the completion call; any other value takes `complete`.
    same: type | None = None
    # For LEAF steps whose serialization of a value of exactly type `same` is known without
    # the completion (_quick: Int in range, Strawberry's DateTime, an enum's members): that
    # function; None with `same` set: the value itself.
    convert: Callable[[Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class RowPlan:
    root: RootResolver  # the root field's value as rows (app.api.schema.feed.feed_rows)
    extras: Callable[[Context, Any], Awaitable[None]] | None  # fills the page's extras
    render: Callable[[Any, Any], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class RowRoot:
    """A root whose value also comes as rows, with how each type's fields read them."""

    root: RootResolver
    extras: Callable[[Context, Any], Awaitable[None]]
    reads: Mapping[str, Mapping[str, RowRead]]


# Roots whose value also comes as rows (decision 0058): `feed`, as FeedRows.
ROW_ROOTS: dict[str, RowRoot] = {"feed": RowRoot(feed_rows, complete_row_extras, ROW_READS)}


@dataclass(frozen=True, slots=True)
class Variable:
    coerce: Callable[[Any], Any]  # the JSON value -> the resolver's argument; raises
    default: Any  # the operation's default (already converted), or _ABSENT


_ABSENT = object()


@dataclass(frozen=True)
class CompiledQuery:
    entry: Registered
    operation_name: str | None
    variables: Mapping[str, Variable]
    root_key: str
    root_node: FieldNode
    root: RootResolver
    # python name -> (None, the literal or default) or (variable, the argument's default)
    arguments: Mapping[str, tuple[str | None, Any]]
    steps: tuple[Step, ...]
    process_errors: Callable[[list[GraphQLError]], None]  # the schema's error policy
    extras: Callable[[Context, Any], Awaitable[None]] | None  # fills the page's extras
    # `steps` as straight-line code (_generate): what _render does, without the loop over
    # steps and the per-step branching. None: _render walks the steps.
    render: Callable[[Any, Any], dict[str, Any]] | None = None
    # The row plan (ROW_ROOTS): the root's value as rows (no objects per post), its extras'
    # completion and its generated render (`_generate` with `reads`); None when the root
    # has none or the selection reads a field its table lacks. Preferred by `execute`.
    rows: RowPlan | None = None

    def arguments_for(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The root resolver's keyword arguments for already coerced variable `values`."""
        kwargs: dict[str, Any] = {}
        for name, (variable, value) in self.arguments.items():
            if variable is None:
                kwargs[name] = value
            elif variable in values:
                kwargs[name] = values[variable]
            elif self.variables[variable].default is not _ABSENT:
                kwargs[name] = self.variables[variable].default
            elif value is not _ABSENT:
                kwargs[name] = value
        return kwargs

    async def execute(self, context: Context, values: Mapping[str, Any]) -> dict[str, Any]:
        """The response body as the regular path makes it: {"data": ...} or, when the root
        field fails, {"data": null, "errors": [...]} through the schema's error policy.
        Raises NotCompilable when the root field's value is one the plan cannot render
        (the caller answers with the regular path)."""
        rows = self.rows
        root, extras = (self.root, self.extras) if rows is None else (rows.root, rows.extras)
        try:
            value = await root(context, **self.arguments_for(values))
        except Exception as exc:  # as graphql-core locates a resolver's error
            return {"data": None, "errors": [self.field_error(exc)]}
        try:
            if extras is not None:
                await extras(context, value)
            render = self.render if rows is None else rows.render
            body = (
                render(value, value.extras)
                if render is not None
                else _render(self.steps, value, value.extras)
            )
            return {"data": {self.root_key: body}}
        except NotCompilable:
            raise
        except Exception as exc:  # graphql-core would locate it deeper: not ours to answer
            raise NotCompilable(f"rendering failed: {exc!r}") from exc

    def field_error(self, exc: Exception) -> dict[str, Any]:
        error = located_error(exc, [self.root_node], [self.root_key])
        self.process_errors([error])
        return dict(error.formatted)


def _never_awaitable(value: Any) -> bool:
    return False


def _leaf_value(step: Step, complete: Any, value: Any) -> Any:
    coerced = complete(value, _never_awaitable)
    if coerced is MISS:
        raise NotCompilable(f"{step.type_name}.{step.key} = {value!r}")
    return coerced


def _render(steps: tuple[Step, ...], source: Any, extras: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for step in steps:
        kind = step.kind
        if kind == TYPENAME:
            out[step.key] = step.type_name
            continue
        if kind == EXTRAS:
            read, complete = step.complete
            value = read(source, extras)
            if value is None:
                raise NotCompilable(f"{step.type_name}.{step.key}: not in the page's extras")
            if type(value) is step.same:
                out[step.key] = value
                continue
            out[step.key] = (
                _render(complete, value, extras)
                if type(complete) is tuple
                else (_leaf_value(step, complete, value))
            )
            continue
        value = getattr(source, step.attribute)
        if value is None:
            if step.non_null:
                raise NotCompilable(f"null {step.type_name}.{step.key}")
            out[step.key] = None
        elif kind == LEAF:
            if type(value) is step.same:
                convert = step.convert
                out[step.key] = value if convert is None else convert(value)
            else:
                out[step.key] = _leaf_value(step, step.complete, value)
        elif kind == OBJECT:
            out[step.key] = _render(step.complete, value, extras)
        else:  # LIST of objects
            out[step.key] = [_render(step.complete, item, extras) for item in value]
    return out


def _generate(
    steps: tuple[Step, ...], reads: Mapping[str, Mapping[str, RowRead]] | None = None
) -> Callable[[Any, Any], dict[str, Any]]:
    """`_render(steps, source, extras)` as generated Python: one function per object level,
    each step's value read into a local in step order, then one dict display. Same values,
    same order, the same NotCompilable cases (a null where the type forbids one, an extras
    read that finds nothing, a leaf its completion refuses). Only names made here go into the
    source: response keys, messages, steps and functions are passed as constants (`names`),
    and an attribute is read by name only when it is a plain identifier (else `getattr`).

    With `reads` (app.api.schema.feed's ROW_READS), a row plan: each field's value is read
    as `reads[type][attribute]` says, from the rows that stand in for the objects (FeedRows,
    (cursor, row) edges, FeedRow, the author's row), then completed as above; a field the
    table lacks raises NotCompilable here (the plan then renders from objects)."""
    names: dict[str, Any] = {
        "NotCompilable": NotCompilable,
        "_leaf_value": _leaf_value,
        "_type": type,
        "_getattr": getattr,
    }
    lines: list[str] = []

    def const(value: Any) -> str:
        name = f"c{len(names)}"
        names[name] = value
        return name

    def level(steps: tuple[Step, ...]) -> str:
        fn = f"r{len(names)}"
        names[fn] = None  # reserved; the function itself lands here after exec
        body: list[str] = []
        items: list[str] = []
        for i, step in enumerate(steps):
            key = const(step.key)
            local = f"v{i}"
            if step.kind == TYPENAME:
                items.append(f"{key}: {const(step.type_name)}")
                continue
            items.append(f"{key}: {local}")
            missing = const(f"{step.type_name}.{step.key}: not in the page's extras")
            null = const(f"null {step.type_name}.{step.key}")
            row = _row_read(reads, step) if reads is not None else None
            if step.kind == EXTRAS:
                read, complete = step.complete
                if row is not None:
                    if not callable(row.source):
                        raise NotCompilable(f"{step.type_name}.{step.key}: not an extras read")
                    read = row.source
                body.append(f"    v = {const(read)}(src, extras)")
                body.append(f"    if v is None: raise NotCompilable({missing})")
                if type(complete) is tuple:
                    sub = level(complete)
                    other = f"{sub}(v, extras)"
                else:
                    other = f"_leaf_value({const(step)}, {const(complete)}, v)"
                if step.same is not None:
                    body.append(f"    {local} = v if _type(v) is {const(step.same)} else {other}")
                else:
                    body.append(f"    {local} = {other}")
                continue
            if row is not None:
                body.append(f"    v = {_row_expression(row, step, const)}")
            else:
                body.append(f"    v = {_attribute_expression(step.attribute, const)}")
            body.append("    if v is None:")
            if step.non_null:
                body.append(f"        raise NotCompilable({null})")
            else:
                body.append(f"        {local} = None")
            if step.kind == LEAF:
                leaf = f"_leaf_value({const(step)}, {const(step.complete)}, v)"
                if isinstance(step.convert, _Int32):  # the range check inline, no call
                    body.append(f"    elif _type(v) is int and {_INT_MIN} <= v <= {_INT_MAX}:")
                    body.append(f"        {local} = v")
                elif step.same is not None:
                    body.append(f"    elif _type(v) is {const(step.same)}:")
                    if step.convert is None:
                        body.append(f"        {local} = v")
                    else:
                        body.append(f"        {local} = {const(step.convert)}(v)")
                body.append("    else:")
                body.append(f"        {local} = {leaf}")
            elif step.kind == OBJECT:
                body.append("    else:")
                body.append(f"        {local} = {level(step.complete)}(v, extras)")
            else:  # LIST of objects
                sub = level(step.complete)
                body.append("    else:")
                body.append(f"        {local} = [{sub}(item, extras) for item in v]")
        lines.append(f"def {fn}(src, extras):")
        lines.extend(body)
        lines.append(f"    return {{{', '.join(items)}}}")
        return fn

    root = level(steps)
    exec(compile("\n".join(lines), "<compiled render>", "exec"), names)
    render: Callable[[Any, Any], dict[str, Any]] = names[root]
    return render


def _attribute_expression(attribute: str, const: Callable[[Any], str]) -> str:
    if attribute.isidentifier() and not keyword.iskeyword(attribute):
        return f"src.{attribute}"
    return f"_getattr(src, {const(attribute)})"


def _row_read(reads: Mapping[str, Mapping[str, RowRead]], step: Step) -> RowRead:
    found = reads.get(step.type_name, {}).get(step.attribute)
    if found is None:
        raise NotCompilable(f"{step.type_name}.{step.key}: no row read")
    return found


def _row_expression(row: RowRead, step: Step, const: Callable[[Any], str]) -> str:
    """A basic field's value read from its row, as `row` says (see RowRead)."""
    source = row.source
    if type(source) is int:
        value = f"src[{source}]"
    elif type(source) is str:
        value = _attribute_expression(source, const)
    else:
        raise NotCompilable(f"{step.type_name}.{step.key}: an extras read for a plain field")
    return value if row.convert is None else f"{const(row.convert)}({value})"


# -- compiling -----------------------------------------------------------------------------


def unmirrored_extensions(schema: GraphQLSchema) -> list[str]:
    """The schema's extensions this module does not mirror (then it compiles nothing)."""
    owner = strawberry_schema(schema)
    return [n for n in extension_names(owner) if n not in MIRRORED_EXTENSIONS] if owner else []


def compile_documents(
    schema: GraphQLSchema,
    documents: Mapping[str, Registered],
    process_errors: Callable[[list[GraphQLError]], None],
) -> dict[str, CompiledQuery]:
    """Registered text -> its compiled query, for each document this module can plan; none
    when the schema has an extension this module does not mirror."""
    unknown = unmirrored_extensions(schema)
    if unknown:
        log.warning("compiled documents off: extensions %s are not mirrored", unknown)
        return {}
    compiled = {}
    for text, entry in documents.items():
        try:
            compiled[text] = _compile(schema, entry, process_errors)
        except NotCompilable:
            continue
    return compiled


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

    def get(self, text: str) -> CompiledQuery | None:
        """The plan of `text`, made on its second sighting; None: the regular path answers."""
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
        if seen.pop(text, None) is None:
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


def _compile(
    schema: GraphQLSchema,
    entry: Registered,
    process_errors: Callable[[list[GraphQLError]], None],
) -> CompiledQuery:
    document = entry.document
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if len(operations) != 1 or operations[0].operation is not OperationType.QUERY:
        raise NotCompilable("one query operation")
    operation = operations[0]
    fragments = _fragments(document)
    query_type = schema.query_type
    assert query_type is not None
    roots = _collect(operation.selection_set, query_type, fragments)
    if len(roots) != 1:
        raise NotCompilable("one root field")
    ((root_key, root_node),) = roots.items()
    root = ROOTS.get(root_node.name.value)
    field_def = query_type.fields.get(root_node.name.value)
    if root is None or field_def is None or root_node.selection_set is None:
        raise NotCompilable("root field")
    variables = {
        d.variable.name.value: _variable(schema, d.type, d.default_value)
        for d in operation.variable_definitions or ()
    }
    # As graphql-core's get_argument_values: a variable, a literal, or the argument's default.
    given = {node.name.value: node.value for node in root_node.arguments or ()}
    if not given.keys() <= field_def.args.keys():
        raise NotCompilable("argument")
    arguments: dict[str, tuple[str | None, Any]] = {}
    for graphql_name, arg_def in field_def.args.items():
        python_name = arg_def.out_name or _python_name(field_def, graphql_name)
        value = given.get(graphql_name)
        default = _ABSENT if arg_def.default_value is Undefined else arg_def.default_value
        if isinstance(value, VariableNode):
            if value.name.value not in variables:
                raise NotCompilable("undefined variable")
            arguments[python_name] = (value.name.value, default)
        elif value is not None:
            arguments[python_name] = (None, _literal(schema, arg_def.type, value))
        elif default is not _ABSENT:
            arguments[python_name] = (None, default)
    object_type = _object_type(field_def.type)
    steps = _steps(schema, object_type, root_node.selection_set, fragments)
    uses_extras = _uses_extras(steps)
    return CompiledQuery(
        entry=entry,
        operation_name=operation.name.value if operation.name else None,
        variables=variables,
        root_key=root_key,
        root_node=root_node,
        root=root,
        arguments=arguments,
        steps=steps,
        process_errors=process_errors,
        extras=complete_page_extras if uses_extras else None,
        render=_generate(steps),
        rows=_row_plan(root_node.name.value, steps, uses_extras),
    )


def _row_plan(root: str, steps: tuple[Step, ...], uses_extras: bool) -> RowPlan | None:
    """The row plan of a root field's steps, when its root has rows and every field selected
    has a row read (ROW_ROOTS); else None."""
    row_root = ROW_ROOTS.get(root)
    if row_root is None:
        return None
    try:
        render = _generate(steps, row_root.reads)
    except NotCompilable:
        return None
    return RowPlan(row_root.root, row_root.extras if uses_extras else None, render)


def _uses_extras(steps: tuple[Step, ...]) -> bool:
    return any(
        s.kind == EXTRAS or (s.kind in (OBJECT, LIST) and _uses_extras(s.complete)) for s in steps
    )


def _python_name(field_def: Any, graphql_name: str) -> str:
    """The resolver parameter a GraphQL argument feeds (Strawberry's converter keeps it)."""
    definition = strawberry_field(field_def)
    for argument in getattr(definition, "arguments", ()):
        if argument.graphql_name == graphql_name or argument.python_name == graphql_name:
            return str(argument.python_name)
    raise NotCompilable("argument name")


def _fragments(document: DocumentNode) -> dict[str, FragmentDefinitionNode]:
    return {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}


def _collect(
    selection_set: SelectionSetNode,
    parent: GraphQLObjectType,
    fragments: Mapping[str, FragmentDefinitionNode],
    into: dict[str, FieldNode] | None = None,
) -> dict[str, FieldNode]:
    """Response key -> field, through fragments; a key twice (merging) is not planned."""
    fields = {} if into is None else into
    for selection in selection_set.selections:
        if selection.directives:
            raise NotCompilable("directives")
        if isinstance(selection, FieldNode):
            key = selection.alias.value if selection.alias else selection.name.value
            if key in fields:
                raise NotCompilable("a response key twice")
            fields[key] = selection
            continue
        if isinstance(selection, FragmentSpreadNode):
            fragment = fragments[selection.name.value]
            condition: NamedTypeNode | None = fragment.type_condition
            inner = fragment.selection_set
        else:
            assert isinstance(selection, InlineFragmentNode)
            condition, inner = selection.type_condition, selection.selection_set
        if condition is not None and condition.name.value != parent.name:
            raise NotCompilable("type condition")
        _collect(inner, parent, fragments, fields)
    return fields


def _steps(
    schema: GraphQLSchema,
    parent: GraphQLObjectType,
    selection_set: SelectionSetNode,
    fragments: Mapping[str, FragmentDefinitionNode],
) -> tuple[Step, ...]:
    owner = strawberry_schema(schema)
    steps = []
    for key, node in _collect(selection_set, parent, fragments).items():
        name = node.name.value
        if node.arguments:
            raise NotCompilable("arguments below the root")
        if name == "__typename":
            steps.append(Step(key, TYPENAME, "", True, None, parent.name))
            continue
        field_def = parent.fields.get(name)
        if field_def is None:
            raise NotCompilable("unknown field")
        non_null = isinstance(field_def.type, GraphQLNonNull)
        definition = strawberry_field(field_def)
        read = definition.metadata.get(PAGE_EXTRAS) if definition is not None else None
        if read is not None:
            how, target = completion(field_def.type.of_type if non_null else field_def.type)
            if how == LEAF:
                complete = target
            elif how == OBJECT and node.selection_set is not None:
                complete = _steps(schema, target, node.selection_set, fragments)
            else:
                raise NotCompilable(f"{parent.name}.{name} from the page's extras")
            same = _same(field_def.type) if how == LEAF else None
            # The attribute names the field for a row plan's reads (ROW_ROOTS).
            attribute = str(definition.python_name) if definition is not None else ""
            steps.append(
                Step(key, EXTRAS, attribute, non_null, (read, complete), parent.name, same)
            )
            continue
        kind, _, _, attribute, target = classify_field(owner, field_def, name)
        if kind == LEAF:
            same, convert = _quick(field_def.type, target, f"{parent.name}.{key}")
            steps.append(Step(key, LEAF, attribute, non_null, target, parent.name, same, convert))
        elif kind == OBJECT and node.selection_set is not None:
            sub = _steps(schema, target, node.selection_set, fragments)
            steps.append(Step(key, OBJECT, attribute, non_null, sub, parent.name))
        elif kind == LIST and node.selection_set is not None:
            item_type, item = target
            if not isinstance(item_type, GraphQLNonNull):
                raise NotCompilable("nullable list items")
            sub = _steps(schema, item, node.selection_set, fragments)
            steps.append(Step(key, LIST, attribute, non_null, sub, parent.name))
        else:
            raise NotCompilable(f"{parent.name}.{name}")
    return tuple(steps)


# graphql-core's own scalars whose serializer returns a value of this type unchanged.
_SAME: tuple[tuple[Any, type], ...] = (
    (GraphQLString, str),
    (GraphQLID, str),
    (GraphQLBoolean, bool),
)


def _same(type_: Any) -> type | None:
    inner = type_.of_type if isinstance(type_, GraphQLNonNull) else type_
    return next((python for scalar, python in _SAME if inner is scalar), None)


def _quick(
    type_: Any, complete: Any, where: str
) -> tuple[type | None, Callable[[Any], Any] | None]:
    """(Python type, its serialization) for a leaf whose output for a value of exactly that
    type is known without the completion call, each equal to what the completion gives:
    String, ID, Boolean (the value itself, `_same`); graphql-core's Int (the value itself
    within 32 bits; outside them the completion fails, so the plan does: NotCompilable);
    Strawberry's DateTime (its serializer is `isoformat`); a Strawberry enum (each member's
    completion, made once here: a member is a singleton and its name never changes, as the
    executor's memo already assumes). (None, None): every value takes the completion."""
    same = _same(type_)
    if same is not None:
        return same, None
    inner = type_.of_type if isinstance(type_, GraphQLNonNull) else type_
    if inner is GraphQLInt:
        return int, _Int32(where)
    if isinstance(inner, GraphQLScalarType) and inner.serialize is STRAWBERRY_ISOFORMAT:
        return datetime, datetime.isoformat
    wrapped = enum_class(inner)
    if wrapped is not None and issubclass(wrapped, enum.Enum):
        names = {member: complete(member, _never_awaitable) for member in wrapped}
        if any(name is MISS for name in names.values()):
            return None, None
        return wrapped, names.__getitem__
    return None, None


def _object_type(type_: Any) -> GraphQLObjectType:
    inner = type_.of_type if isinstance(type_, GraphQLNonNull) else type_
    if not isinstance(inner, GraphQLObjectType) or inner.is_type_of:
        raise NotCompilable("root type")
    return inner


# -- variables and arguments ---------------------------------------------------------------

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


class _Int32:
    """An Int leaf's serialization of an `int` (`_quick`): the value within 32 bits, else
    NotCompilable (serialize_int refuses it). `_generate` writes the range check inline."""

    __slots__ = ("where",)

    def __init__(self, where: str) -> None:
        self.where = where

    def __call__(self, value: int) -> int:
        if _INT_MIN <= value <= _INT_MAX:
            return value
        raise NotCompilable(f"{self.where} = {value!r}")


def _int(value: Any) -> int:
    if type(value) is not int or not _INT_MIN <= value <= _INT_MAX:
        raise ValueError
    return value


def _str(value: Any) -> str:
    if type(value) is not str:
        raise ValueError
    return value


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise ValueError
    return value


_SCALARS: dict[str, Callable[[Any], Any]] = {"Int": _int, "String": _str, "Boolean": _bool}


def _input(schema: GraphQLSchema, name: str) -> Callable[[Any], Any]:
    """A nullable named input type's plain coercion: a JSON value to what the resolver
    gets (a Strawberry enum's member for an enum); ValueError for anything else."""
    if name in _SCALARS:
        return _SCALARS[name]
    named = schema.get_type(name)
    members = enum_class(named)  # a Strawberry enum's Python class
    if not isinstance(named, GraphQLEnumType) or members is None:
        raise NotCompilable(f"input type {name}")
    values = named.values
    by_name = {graphql_name: members(value.value) for graphql_name, value in values.items()}

    def enum(value: Any) -> Any:
        if type(value) is not str or value not in by_name:
            raise ValueError
        return by_name[value]

    return enum


def _nullable(coerce: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else coerce(value)


def _variable(schema: GraphQLSchema, type_node: Any, default: ValueNode | None) -> Variable:
    if isinstance(type_node, (NonNullTypeNode, ListTypeNode)):
        raise NotCompilable("only nullable named variable types")
    coerce = _nullable(_input(schema, type_node.name.value))
    return Variable(coerce, _ABSENT if default is None else _convert(coerce, default))


def _convert(coerce: Callable[[Any], Any], node: ValueNode) -> Any:
    """A literal (default or argument) through the same coercion as a JSON value."""
    if isinstance(node, EnumValueNode):
        return coerce(node.value)
    value = value_from_ast_untyped(node)
    try:
        return coerce(value)
    except ValueError:
        raise NotCompilable("literal") from None


def _literal(schema: GraphQLSchema, type_: Any, node: ValueNode) -> Any:
    inner = type_.of_type if isinstance(type_, GraphQLNonNull) else type_
    name = getattr(inner, "name", None)
    if name is None:
        raise NotCompilable("argument type")
    return _convert(_nullable(_input(schema, name)), node)
