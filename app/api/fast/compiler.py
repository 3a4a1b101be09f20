"""Registered documents compiled to direct code: the feed without graphql-core or the view.

A registered document (transports.trusted) is known at start-up, so its whole selection can be
planned once: which attribute each response key reads, how each leaf serializes. When every
field of a registered query is one this module can plan, `compile_documents` makes a
`CompiledQuery` of it (and `TextPlans` does the same, on demand and bounded, for a text sent
twice that is not registered), and app.api.fast.compiled_http answers such a request over HTTP with
the root field's value rendered straight to JSON: no request parsing by Strawberry's view,
no graphql-core execution context, no per-field Path/Info/resolver wrapper. What is planned:

- the root field: `feed` only (ROOTS), its arguments from literals or variables, and
  `__typename` beside it (the query type's name: the client preset's
  addTypenameSelectionDocumentTransform adds it there);
- `__typename`; Strawberry *basic* fields (attribute reads, app.api.fast.executor's
  `classify_field`) of leaf types (through the leaf type's own output coercion), of object
  types and of lists of them;
- resolver fields whose type declares how a page's `extras` answer them (app.api.schema.types,
  `PAGE_EXTRAS`: today `Post.author` and `Post.viewerHasLiked`, the authors and the
  viewer's likes read with the page's rows, and `Post.media`, a list of objects, each item
  planned like an object's fields); what a page did not hold is loaded through the
  request's DataLoaders first (app.api.schema.feed.complete_page_extras; the page's media
  only when the document selects Post.media: `complete_page_extras_with_media`, the
  regular path's loader, one query for the page, URLs minted by app.media for the viewer).

Anything else (other fields, directives, arguments below the root, abstract types, a
response key used twice unless by the same leaf without arguments, a document with more than
one operation) leaves the document to the regular path, as do requests whose variables are
not plainly valid (app.api.fast.compiled_http), and, at run time, a value the plan cannot
render (a null in a non-null field, a leaf its scalar rejects, an author the page lacks):
`execute` raises `NotCompilable` and the request is answered by the regular path instead. So
nothing is refused here that graphql-core would accept. Values are read from this request's
objects only: nothing is cached across requests but the plans.

A `feed` plan whose every selected field has a row read (app.api.schema.feed's ROW_READS)
also gets a row plan (`RowPlan`, decision 0058), which `execute` prefers: the root's value
as FeedRows (each edge a (cursor, FeedRow) pair) and a render generated to read each field
from the rows, so no PostEdge, Post, User or FeedPost is built per post; the same leaf
completions and NotCompilable cases (tests/api/fast/test_compiled_rows.py holds both renders
byte-equal).

The schema's extensions are mirrored by name (MIRRORED_EXTENSIONS): a schema with one this
module does not know compiles nothing.

The bytes are the regular path's: tests/api/fast/test_compiled_documents.py runs random feeds and
documents through both and compares the responses, including errors.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLBoolean,
    GraphQLError,
    GraphQLID,
    GraphQLInt,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    GraphQLString,
    InlineFragmentNode,
    NamedTypeNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    VariableNode,
)

from app.api.fast.codegen import _generate
from app.api.fast.coercion import _Int32, _literal, _variable
from app.api.fast.executor import LEAF, LIST, MISS, OBJECT, TYPENAME, classify_field, completion
from app.api.fast.plan import (
    _ABSENT,
    EXTRAS,
    EXTRAS_LIST,
    CompiledQuery,
    NotCompilable,
    RootResolver,
    RowPlan,
    RowRoot,
    Step,
    _never_awaitable,
)
from app.api.schema.feed import (
    ROW_READS,
    complete_page_extras,
    complete_page_extras_with_media,
    complete_row_extras,
    complete_row_extras_with_media,
    feed_connection,
    feed_rows,
)
from app.api.schema.types import PAGE_EXTRAS
from app.api.transports.trusted import Registered
from app.api.upstream.graphql import Undefined
from app.api.upstream.strawberry import (
    STRAWBERRY_ISOFORMAT,
    enum_class,
    strawberry_field,
    strawberry_schema,
)

log = logging.getLogger("app.api")

# Root fields a compiled document may select: the function the field's resolver calls.
ROOTS: dict[str, RootResolver] = {"feed": feed_connection}

# The schema's extensions (app.api.endpoint.schema.build_schema), by class name, and what a compiled
# request does in their place. A schema with any other extension compiles nothing: a new
# extension must be added here, with its counterpart, before compiled documents come back
# (tests/api/fast/test_compiled_documents.py compares this list with the schema's).
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


# Roots whose value also comes as rows (decision 0058): `feed`, as FeedRows.
ROW_ROOTS: dict[str, RowRoot] = {
    "feed": RowRoot(feed_rows, complete_row_extras, ROW_READS, complete_row_extras_with_media)
}
# Roots whose extras completion also reads the page's media (a document selecting Post.media).
MEDIA_EXTRAS: dict[str, Callable[[Any, Any], Awaitable[None]]] = {
    "feed": complete_page_extras_with_media
}


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
    selected = _collect(operation.selection_set, query_type, fragments)
    # `__typename` beside the root field is a constant (the query type's name).
    roots = {k: node for k, node in selected.items() if node.name.value != "__typename"}
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
    media = _selects(steps, "Post", "media")  # the page's media: one query, only then
    if _selects(steps, "PostEdge", "recommendation"):
        # The feed reads why each recommendation is only when it is shown (a query).
        arguments["why"] = (None, True)
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
        extras=_page_extras(root_node.name.value, uses_extras, media),
        render=_generate(steps),
        rows=_row_plan(root_node.name.value, steps, uses_extras, media),
        data_keys=tuple(selected) if len(selected) > 1 else (),
        query_type_name=query_type.name,
    )


def _page_extras(
    root: str, uses_extras: bool, media: bool
) -> Callable[[Any, Any], Awaitable[None]] | None:
    """How the root's value gets what its extras reads need: none, the authors and likes,
    or those and the page's media (MEDIA_EXTRAS)."""
    if not uses_extras:
        return None
    return MEDIA_EXTRAS.get(root, complete_page_extras) if media else complete_page_extras


def _row_plan(
    root: str, steps: tuple[Step, ...], uses_extras: bool, media: bool = False
) -> RowPlan | None:
    """The row plan of a root field's steps, when its root has rows and every field selected
    has a row read (ROW_ROOTS); else None."""
    row_root = ROW_ROOTS.get(root)
    if row_root is None:
        return None
    try:
        render = _generate(steps, row_root.reads)
    except NotCompilable:
        return None
    extras = (row_root.media_extras if media else row_root.extras) if uses_extras else None
    return RowPlan(row_root.root, extras, render)


def _selects(steps: tuple[Step, ...], type_name: str, key: str) -> bool:
    """Whether the steps select the field `key` (its Python name) of `type_name` anywhere."""
    for s in steps:
        if s.type_name == type_name and s.attribute == key:
            return True
        if s.kind in (OBJECT, LIST) and _selects(s.complete, type_name, key):
            return True
    return False


def _uses_extras(steps: tuple[Step, ...]) -> bool:
    return any(
        s.kind in (EXTRAS, EXTRAS_LIST) or (s.kind in (OBJECT, LIST) and _uses_extras(s.complete))
        for s in steps
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
    """Response key -> field, through fragments; a key twice is planned only when both are
    the same leaf without arguments (`__typename` in a fragment and beside its spread, as
    clients add it; an `id` two fragments select), whose merge is the first: other merging
    is not planned."""
    fields = {} if into is None else into
    for selection in selection_set.selections:
        if selection.directives:
            raise NotCompilable("directives")
        if isinstance(selection, FieldNode):
            key = selection.alias.value if selection.alias else selection.name.value
            if key in fields:
                if _same_plain_leaf(fields[key], selection):
                    continue
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


def _same_plain_leaf(first: FieldNode, second: FieldNode) -> bool:
    return (
        first.name.value == second.name.value
        and not first.arguments
        and not second.arguments
        and first.selection_set is None
        and second.selection_set is None
    )


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
            inner = field_def.type.of_type if non_null else field_def.type
            if isinstance(inner, GraphQLList):  # Post.media: a list of objects
                item = _object_items(inner, f"{parent.name}.{name}")
                if node.selection_set is None:
                    raise NotCompilable(f"{parent.name}.{name} from the page's extras")
                complete = _steps(schema, item, node.selection_set, fragments)
                attribute = str(definition.python_name) if definition is not None else ""
                steps.append(
                    Step(key, EXTRAS_LIST, attribute, non_null, (read, complete), parent.name)
                )
                continue
            how, target = completion(inner)
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


def _object_items(list_type: GraphQLList[Any], where: str) -> GraphQLObjectType:
    """The object type of a list of non-null objects read from the page's extras."""
    item = list_type.of_type
    if isinstance(item, GraphQLNonNull):
        how, target = completion(item.of_type)
        if how == OBJECT:
            return target  # type: ignore[no-any-return]
    raise NotCompilable(f"{where} from the page's extras")


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
