"""A compiled document's plan (app.api.fast.compiler makes it) and how it runs.

`CompiledQuery` holds what planning found: the root field's resolver and arguments, the
operation's variables, and the selection as `Step`s, with the generated render
(app.api.fast.codegen) and, where the root has rows, a `RowPlan`; `execute` answers a request
with it. `_render` walks the steps (the reference the generated code is held to); a value it
cannot render raises NotCompilable and the regular path answers instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from graphql import FieldNode, GraphQLError, located_error

from app.api.fast.executor import LEAF, MISS, OBJECT, TYPENAME
from app.api.schema.context import Context
from app.api.schema.feed import RowRead
from app.api.transports.trusted import Registered

EXTRAS = 10  # a field read from the page's extras (its type's PAGE_EXTRAS declaration)
EXTRAS_LIST = 11  # the same for a list of objects (Post.media): each item through its steps

RootResolver = Callable[..., Awaitable[Any]]


class NotCompilable(Exception):
    """A document (or a value at run time) this module does not handle."""


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
    media_extras: Callable[[Context, Any], Awaitable[None]]  # `extras` and the page's media


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
    # The root selection's response keys in order when it also asks `__typename` (as the
    # client preset's addTypenameSelectionDocumentTransform adds it): each but root_key is
    # the query type's name. Empty: the root field alone.
    data_keys: tuple[str, ...] = ()
    query_type_name: str = "Query"

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
            if not self.data_keys:
                return {"data": {self.root_key: body}}
            root_key, typename = self.root_key, self.query_type_name
            return {"data": {k: body if k == root_key else typename for k in self.data_keys}}
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
        if kind == EXTRAS_LIST:
            read, complete = step.complete
            value = read(source, extras)
            if value is None:
                raise NotCompilable(f"{step.type_name}.{step.key}: not in the page's extras")
            out[step.key] = [_render(complete, item, extras) for item in value]
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
