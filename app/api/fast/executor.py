"""A faster graphql-core executor: the per-field machinery is skipped where it does nothing.

graphql-core spends ~4-6 us on every field: a response Path, a GraphQLResolveInfo (Strawberry
builds its own subclass), the resolver through Strawberry's wrapper (an Info object,
argument conversion, an extension chain), then `complete_value` twice (NonNull, then the
leaf or object) before the scalar's `coerce_output_value`. A 20-post feed page has ~300
fields, nearly all of them attributes of Post/User/PostEdge/PageInfo objects.

`FastExecutor.execute_fields` runs a selection set from a *plan*, made once per grouped field
set and request (graphql-core memoizes the grouped field set per object type and field list,
so a page's 20 posts share one plan). What a field's step does is decided once per schema
field (`classify_field`):

- `__typename`: the parent type's name, as graphql-core's meta field resolves it.
- A Strawberry *basic* field (no resolver, no field extension, no exception handler: its
  GraphQL resolver is Strawberry's `_get_basic_result`, i.e. `default_resolver(source,
  python_name)`, getattr by default) of a leaf type: that value through the leaf type's own
  `coerce_output_value`, the function graphql-core's `complete_leaf_value` calls. Of an object
  type (without `is_type_of`) or a list of one: the sub-selection through the executor's own
  `collect_subfields`/`execute_fields`, with graphql-core's error handling at the field and
  at each list item.
- A field with a plain synchronous Strawberry resolver (no arguments, no field extension):
  the resolver itself, with the same arguments Strawberry passes (self/root/parent, a real
  Info on a real GraphQLResolveInfo), then the completion above, or graphql-core's own
  `complete_value`/`complete_awaitable_value` for anything else (awaitables included).
- Anything else (arguments, async resolvers, abstract types, meta fields...): graphql-core's
  `execute_field`, unchanged.

Every field's value is read (or its resolver called) once, as graphql-core does. A value
that is anything but plain (null in a non-null field, an Exception returned as a value, an
awaitable, a value the scalar rejects or turns into null, a list holding any of these) goes
on through graphql-core's own `complete_value`/`complete_awaitable_value` for that field;
errors are located, nulled and propagated by graphql-core's `handle_field_error`.

Nothing is reused across requests but the classification of schema fields and each Strawberry
enum member's name (functions of the schema alone): every value is read from this request's
objects, so nothing can be stale. Every field takes graphql-core's path when an extension
wraps resolvers (a middleware); resolvers do when the schema has exception handlers.

Sameness with graphql-core: tests/api/fast/test_fast_execution.py (random documents over random
social graphs, byte-for-byte JSON, before and after likes, comments, edits, visibility
changes, deletes, blocks and display-name changes). FAST_EXECUTION=0 switches it off;
docs/decisions/0008-fast-execution.md has the design and the measurements.
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any
from uuid import UUID
from weakref import WeakKeyDictionary

from graphql import (
    GraphQLField,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLSchema,
    is_leaf_type,
    is_object_type,
)

from app.api.upstream.graphql import (
    FieldDetailsList,
    GroupedFieldSet,
    Path,
    Undefined,
    forget_subfield_memo,
    gather_with_cancel,
    to_nodes,
)
from app.api.upstream.strawberry import (
    BASIC_RESOLVER,
    SYNC_RESOLVER,
    BaseExecutor,
    StrawberryField,
    enum_class,
    make_info,
    strawberry_field,
    strawberry_schema,
)

# Step kinds.
SLOW = 0  # graphql-core's execute_field
TYPENAME = 1
LEAF = 2  # basic field of a scalar or enum type
OBJECT = 3  # basic field of an object type without is_type_of
LIST = 4  # basic field of a list of such objects
DIRECT = 5  # plain synchronous Strawberry resolver


class EventScopedExecutor(BaseExecutor):
    """graphql-core 3.3.2 shares its subfield memo between a subscription's executor and the
    per-event copies, keyed by the id of a list built anew for every event: each frame
    leaves ~17 objects behind for the life of the socket. Per-event copies get their own.
    The regular executor (FAST_EXECUTION=0) is this class; the fast one extends it."""

    def build_per_event_executor(self, payload: Any) -> Any:
        executor = super().build_per_event_executor(payload)
        forget_subfield_memo(executor)
        return executor


class _Resolver:
    """How Strawberry calls a plain resolver (strawberry.schema.schema_converter
    `get_arguments` and `_get_result` for a field without arguments or extensions)."""

    __slots__ = ("field", "info_class", "info_name", "resolver", "source_names", "with_self")

    def __init__(self, field: Any, info_class: type) -> None:
        resolver = field.base_resolver
        self.field = field
        self.info_class = info_class
        self.resolver = resolver
        self.with_self = resolver.self_parameter is not None
        self.source_names = tuple(
            p.name for p in (resolver.parent_parameter, resolver.root_parameter) if p is not None
        )
        self.info_name = resolver.info_parameter.name if resolver.info_parameter else None

    def __call__(self, source: Any, info: Any) -> Any:
        kwargs: dict[str, Any] = dict.fromkeys(self.source_names, source)
        if self.info_name is not None:
            kwargs[self.info_name] = make_info(self.info_class, info, self.field)
        if self.with_self:
            return self.resolver(source, **kwargs)
        return self.resolver(**kwargs)


# (kind, non_null, a, b, c): for LEAF/OBJECT/LIST a = default resolver, b = attribute name,
# c = coerce function / object type / (item type, object type); for DIRECT a = _Resolver,
# b = how its result completes (LEAF, OBJECT or SLOW), c = coerce function / object type.
_Kind = tuple[int, bool, Any, Any, Any]
SLOW_KIND: _Kind = (SLOW, False, None, None, None)
_CLASSIFIED: WeakKeyDictionary[GraphQLSchema, dict[tuple[str, str], _Kind]] = WeakKeyDictionary()


# Values of these exact types are never null, awaitable or an Exception: they go straight
# to the scalar's coerce_output_value.
_SCALAR_VALUES: frozenset[type] = frozenset(
    {str, int, float, bool, datetime.datetime, datetime.date, datetime.time, Decimal, UUID}
)
MISS = object()  # a leaf step's "take graphql-core's path"

_Leaf = Callable[[Any, Callable[[Any], bool]], Any]


def _leaf(leaf: Any) -> _Leaf:
    """A non-null value's completion as `complete_leaf_value` makes it, or MISS where that
    would raise or the value is not one graphql-core completes as a leaf (awaitable,
    Exception). Members of a Strawberry enum are memoized: a member is a singleton and its
    name never changes."""
    coerce: Callable[[Any], Any] = leaf.coerce_output_value
    wrapped = enum_class(leaf)

    def complete(value: Any, is_awaitable: Callable[[Any], bool]) -> Any:
        if type(value) not in _SCALAR_VALUES and not _plain(value, is_awaitable):
            return MISS
        try:
            coerced = coerce(value)
        except Exception:  # graphql-core's path raises it again, located
            return MISS
        return MISS if coerced is None or coerced is Undefined else coerced

    if wrapped is None or not issubclass(wrapped, enum.Enum):
        return complete
    names: dict[Any, Any] = {}

    def complete_member(value: Any, is_awaitable: Callable[[Any], bool]) -> Any:
        member = type(value) is wrapped
        if member:
            name = names.get(value)
            if name is not None:
                return name
        coerced = complete(value, is_awaitable)
        if member and coerced is not MISS:
            names[value] = coerced
        return coerced

    return complete_member


def completion(inner: Any) -> tuple[int, Any]:
    """How a value of this (nullable) type completes without graphql-core's complete_value."""
    if is_leaf_type(inner):
        return LEAF, _leaf(inner)
    if is_object_type(inner) and not inner.is_type_of:
        return OBJECT, inner
    return SLOW, None


def classify_field(owner: Any, field_def: GraphQLField, field_name: str) -> _Kind:
    """What a schema field's step does; `owner` is the Strawberry schema (or None)."""
    return_type: Any = field_def.type
    non_null = isinstance(return_type, GraphQLNonNull)
    inner = return_type.of_type if non_null else return_type
    resolve = field_def.resolve
    name = getattr(resolve, "__name__", None)
    if field_name == "__typename":
        return (TYPENAME, True, None, None, None) if resolve is not None else SLOW_KIND
    definition = strawberry_field(field_def)
    if (
        definition is None
        or type(definition).get_result is not StrawberryField.get_result
        or definition.extensions
        or field_def.args
    ):
        return SLOW_KIND
    if name == BASIC_RESOLVER and definition.base_resolver is None:
        read, attribute = definition.default_resolver, definition.python_name
        kind, target = completion(inner)
        if kind != SLOW:
            return (kind, non_null, read, attribute, target)
        if isinstance(inner, GraphQLList):
            item_type = inner.of_type
            item = item_type.of_type if isinstance(item_type, GraphQLNonNull) else item_type
            if is_object_type(item) and not item.is_type_of:
                return (LIST, non_null, read, attribute, (item_type, item))
        return SLOW_KIND
    if (
        name == SYNC_RESOLVER
        and definition.base_resolver is not None
        and not definition.is_async
        and not definition.arguments
        and owner is not None
        and not owner.exception_handlers
    ):
        kind, target = completion(inner)
        resolver = _Resolver(definition, owner.config.info_class)
        return (DIRECT, non_null, resolver, kind, target)
    return SLOW_KIND


# (kind, response name, field details, field definition, non_null, a, b, c)
_Step = tuple[int, str, FieldDetailsList, Any, bool, Any, Any, Any]


class FastExecutor(EventScopedExecutor):
    """EventScopedExecutor (the subscription fix) with planned, cheaper fields."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        manager = self.middleware_manager
        self._fast = manager is None or not manager.middlewares
        # id(grouped field set) -> (the set, kept alive so that its id stays unique; its plan)
        self._plans: dict[int, tuple[GroupedFieldSet, list[_Step]]] = {}

    def build_per_event_executor(self, payload: Any) -> Any:
        executor = super().build_per_event_executor(payload)
        # A copy of this class: its own memo, fresh (not an upstream private).
        executor._plans = {}  # noqa: SLF001
        return executor

    def _plan(self, parent_type: GraphQLObjectType, fields: GroupedFieldSet) -> list[_Step]:
        schema = self.schema
        known = _CLASSIFIED.get(schema)
        if known is None:
            known = _CLASSIFIED[schema] = {}
        steps: list[_Step] = []
        for response_name, field_details_list in fields.items():
            node = field_details_list[0].node
            field_name = node.name.value
            field_def = schema.get_field(parent_type, field_name)
            if field_def is None:
                continue  # graphql-core leaves it out too (execute_field's Undefined)
            key = (parent_type.name, field_name)
            kind = known.get(key)
            if kind is None:
                kind = known[key] = classify_field(strawberry_schema(schema), field_def, field_name)
            if node.arguments or (
                kind[0] == LIST and any(d.node.directives for d in field_details_list)
            ):
                kind = SLOW_KIND  # invalid arguments; @stream-like directives on a list
            steps.append((kind[0], response_name, field_details_list, field_def, *kind[1:]))
        return steps

    def execute_fields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Path | None,
        grouped_field_set: GroupedFieldSet,
        position_context: Any,
    ) -> Any:
        if not self._fast or position_context is not None:
            return super().execute_fields(
                parent_type, source_value, path, grouped_field_set, position_context
            )
        cached = self._plans.get(id(grouped_field_set))
        if cached is None:
            plan = self._plan(parent_type, grouped_field_set)
            self._plans[id(grouped_field_set)] = (grouped_field_set, plan)
        else:
            plan = cached[1]
        results: dict[str, Any] = {}
        is_awaitable = self.is_awaitable
        awaitable_fields: list[str] = []
        type_name = parent_type.name
        try:
            for kind, name, field_details_list, field_def, non_null, a, b, c in plan:
                if kind == TYPENAME:
                    results[name] = type_name
                    continue
                if kind == SLOW:
                    result = self.execute_field(
                        parent_type,
                        source_value,
                        field_details_list,
                        Path(path, name, type_name),
                        position_context,
                    )
                    if result is Undefined:
                        continue
                elif kind == DIRECT:
                    result = self._execute_direct(
                        parent_type,
                        source_value,
                        field_details_list,
                        field_def,
                        Path(path, name, type_name),
                        a,
                        b,
                        c,
                    )
                else:  # a basic field: read once, as graphql-core's resolver would
                    try:
                        value = a(source_value, b)
                    except Exception as raw_error:  # as in execute_field
                        self.handle_field_error(
                            raw_error,
                            field_def.type,
                            field_details_list,
                            Path(path, name, type_name),
                        )
                        results[name] = None
                        continue
                    if value is None and not non_null:
                        results[name] = None
                        continue
                    result = MISS
                    if kind == LEAF:
                        if value is not None and value is not Undefined:
                            result = c(value, is_awaitable)
                            if result is not MISS:
                                results[name] = result
                                continue
                    elif _plain(value, is_awaitable) and (
                        kind == OBJECT
                        or (type(value) is list and all(_plain(v, is_awaitable) for v in value))
                    ):
                        result = self._complete_nested(
                            kind,
                            c,
                            field_def,
                            field_details_list,
                            Path(path, name, type_name),
                            value,
                        )
                    if result is MISS:  # anything unusual: graphql-core's completion
                        result = self._complete_read(
                            parent_type,
                            field_details_list,
                            field_def,
                            Path(path, name, type_name),
                            value,
                        )
                results[name] = result
                if is_awaitable(result):
                    awaitable_fields.append(name)
        except Exception:
            if awaitable_fields:
                self.settle_in_background([results[field] for field in awaitable_fields])
            raise
        if not awaitable_fields:
            return results
        return self._gather_fields(results, awaitable_fields)

    def _execute_direct(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: FieldDetailsList,
        field_def: GraphQLField,
        path: Path,
        resolver: _Resolver,
        completion: int,
        target: Any,
    ) -> Any:
        """graphql-core's execute_field with Strawberry's resolver call made directly."""
        info = self.build_resolve_info(field_def, to_nodes(field_details_list), parent_type, path)
        try:
            result = resolver(source, info)
        except Exception as raw_error:
            self.handle_field_error(raw_error, field_def.type, field_details_list, path)
            return None
        if result is not None and result is not Undefined:
            if completion == LEAF:
                coerced = target(result, self.is_awaitable)
                if coerced is not MISS:
                    return coerced
            elif completion == OBJECT and _plain(result, self.is_awaitable):
                return self._complete_nested(
                    OBJECT, target, field_def, field_details_list, path, result
                )
        return self._complete_resolved(field_def.type, field_details_list, info, path, result)

    def _complete_read(
        self,
        parent_type: GraphQLObjectType,
        field_details_list: FieldDetailsList,
        field_def: GraphQLField,
        path: Path,
        value: Any,
    ) -> Any:
        """execute_field after its resolver call, for a basic field's value read already."""
        info = self.build_resolve_info(field_def, to_nodes(field_details_list), parent_type, path)
        return self._complete_resolved(field_def.type, field_details_list, info, path, value)

    def _complete_resolved(
        self,
        return_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        info: Any,
        path: Path,
        result: Any,
    ) -> Any:
        """graphql-core's execute_field from its resolver's result on: the same calls."""
        try:
            if self.is_awaitable(result):
                return self.complete_awaitable_value(
                    return_type, field_details_list, info, path, result, None
                )
            completed = self.complete_value(
                return_type, field_details_list, info, path, result, None
            )
            if self.is_awaitable(completed):
                return self._await_completed(completed, return_type, field_details_list, path)
            return completed
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, field_details_list, path)
            return None

    def _complete_nested(
        self,
        kind: int,
        target: Any,
        field_def: GraphQLField,
        field_details_list: FieldDetailsList,
        path: Path,
        value: Any,
    ) -> Any:
        """An object (or list of objects) field's sub-selection, its errors handled at the
        field as execute_field handles them."""
        try:
            if kind == OBJECT:
                completed = self._complete_object(target, field_details_list, path, value)
            else:
                completed = self._complete_list(
                    target[0], target[1], field_details_list, path, value
                )
        except Exception as raw_error:
            self.handle_field_error(raw_error, field_def.type, field_details_list, path)
            return None
        if self.is_awaitable(completed):
            return self._await_completed(completed, field_def.type, field_details_list, path)
        return completed

    def _complete_object(
        self,
        object_type: GraphQLObjectType,
        field_details_list: FieldDetailsList,
        path: Path,
        value: Any,
    ) -> Any:
        """complete_object_value of an object without is_type_of (may raise, like it)."""
        grouped_field_set, new_defer_usages, _ = self.collect_subfields(
            object_type, field_details_list
        )
        if new_defer_usages:  # @defer (not in this schema): graphql-core's incremental path
            return self.collect_and_execute_subfields(
                object_type, field_details_list, path, value, None
            )
        return self.execute_fields(object_type, value, path, grouped_field_set, None)

    def _complete_list(
        self,
        item_type: GraphQLOutputType,
        object_type: GraphQLObjectType,
        field_details_list: FieldDetailsList,
        path: Path,
        items: list[Any],
    ) -> Any:
        """complete_iterable_value of a list of plain objects (no @stream in this schema)."""
        completed_results: list[Any] = []
        append = completed_results.append
        awaitable_indices: list[int] = []
        is_awaitable = self.is_awaitable
        try:
            for index, item in enumerate(items):
                item_path = Path(path, index, None)
                try:
                    completed = self._complete_object(
                        object_type, field_details_list, item_path, item
                    )
                    if is_awaitable(completed):
                        completed = self._await_completed(
                            completed, item_type, field_details_list, item_path
                        )
                        awaitable_indices.append(index)
                except Exception as raw_error:
                    self.handle_field_error(raw_error, item_type, field_details_list, item_path)
                    completed = None
                append(completed)
        except Exception:
            if awaitable_indices:
                self.settle_in_background([completed_results[i] for i in awaitable_indices])
            raise
        if not awaitable_indices:
            return completed_results
        return self._gather_items(completed_results, awaitable_indices)

    async def _await_completed(
        self,
        completed: Awaitable[Any],
        return_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        path: Path,
    ) -> Any:
        try:
            return await completed
        except Exception as raw_error:
            self.handle_field_error(raw_error, return_type, field_details_list, path)
            return None

    @staticmethod
    async def _gather_fields(results: dict[str, Any], awaitable_fields: list[str]) -> Any:
        """graphql-core's get_results (execute_fields)."""
        if len(awaitable_fields) == 1:
            field = awaitable_fields[0]
            results[field] = await results[field]
        else:
            awaited = await gather_with_cancel(*(results[field] for field in awaitable_fields))
            results.update(zip(awaitable_fields, awaited, strict=True))
        return results

    @staticmethod
    async def _gather_items(completed: list[Any], awaitable_indices: list[int]) -> list[Any]:
        """graphql-core's get_completed_results (complete_iterable_value)."""
        if len(awaitable_indices) == 1:
            index = awaitable_indices[0]
            completed[index] = await completed[index]
        else:
            awaited = await gather_with_cancel(*(completed[i] for i in awaitable_indices))
            for index, value in zip(awaitable_indices, awaited, strict=True):
                completed[index] = value
        return completed


def _plain(value: Any, is_awaitable: Callable[[Any], bool]) -> bool:
    """A value graphql-core would complete as an object: not null, not an error, not awaited."""
    return not (
        value is None or value is Undefined or isinstance(value, Exception) or is_awaitable(value)
    )
