"""A plan's steps as generated Python (decision 0052): one function per object level,
what `_render` (app.api.fast.plan) does without its loop and per-step branching."""

from __future__ import annotations

import keyword
from collections.abc import Callable, Mapping
from typing import Any

from app.api.fast.coercion import _INT_MAX, _INT_MIN, _Int32
from app.api.fast.executor import LEAF, OBJECT, TYPENAME
from app.api.fast.plan import EXTRAS, EXTRAS_LIST, NotCompilable, Step, _leaf_value
from app.api.schema.feed import RowRead


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
            if step.kind in (EXTRAS, EXTRAS_LIST):
                read, complete = step.complete
                if row is not None:
                    if not callable(row.source):
                        raise NotCompilable(f"{step.type_name}.{step.key}: not an extras read")
                    read = row.source
                body.append(f"    v = {const(read)}(src, extras)")
                body.append(f"    if v is None: raise NotCompilable({missing})")
                if step.kind == EXTRAS_LIST:
                    body.append(f"    {local} = [{level(complete)}(item, extras) for item in v]")
                    continue
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
