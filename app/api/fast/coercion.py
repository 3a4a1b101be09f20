"""Variables and literal arguments of a compiled document: a JSON value (or a literal) to
what the root resolver gets, for the plain input types the compiler plans (Int, String,
Boolean, Strawberry enums); anything else leaves the document to the regular path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphql import (
    GraphQLEnumType,
    GraphQLNonNull,
    GraphQLSchema,
    ListTypeNode,
    NonNullTypeNode,
    ValueNode,
    value_from_ast_untyped,
)
from graphql.language import EnumValueNode

from app.api.fast.plan import _ABSENT, NotCompilable, Variable
from app.api.upstream.strawberry import enum_class

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
