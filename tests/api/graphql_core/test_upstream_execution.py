"""graphql-core's own execution tests, run with the fast executor as graphql-core's executor.

As graphql-jit runs ports of graphql-js's execution tests against its compiled queries: the
files under third_party/execution/ are graphql-core's tests (execution, variables, non-null and
error propagation, lists, abstract types, resolvers, directives, mutations, sync execution),
copied verbatim (README.md). Every test there calls graphql-core's `execute`/`execute_sync`
without naming an executor; here graphql-core's default executor class is swapped for

- `FastExecutor` (app.api.fast.executor), and
- Strawberry's executor class, the one FastExecutor extends (`adapter.BaseExecutor`),

and each upstream test must pass with the fast executor exactly when it passes with
Strawberry's: a test that fails with both (Strawberry hands resolvers its own resolve info,
say) is Strawberry's difference from graphql-core, not the fast executor's, and is listed
in STRAWBERRY_DIFFERS so that a change in either direction is noticed.

graphql-core's tests use pytest-describe (`describe_*` functions holding the tests); they are
collected here by running each describe function and reading its local functions, as
pytest-describe does. `@pytest.mark.parametrize` marks are expanded; filterwarnings marks are
applied.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from app.api.fast.executor import FastExecutor
from app.api.upstream.strawberry import BaseExecutor

# The module, not the `execute` function the package exports under the same name.
graphql_execute = importlib.import_module("graphql.execution.execute")
UPSTREAM = "tests.api.graphql_core.third_party.execution"
MODULES = (
    "test_abstract",
    "test_directives",
    "test_error_propagation",
    "test_executor",
    "test_lists",
    "test_mutations",
    "test_nonnull",
    "test_resolve",
    "test_schema",
    "test_sync",
    "test_union_interface",
    "test_variables",
)

# Upstream tests that fail with Strawberry's executor class too (and so with the fast one,
# which must fail them the same way): what Strawberry changes, and why.
STRAWBERRY_DIFFERS: dict[str, str] = {
    "test_executor::describe_execute_handles_basic_execution_tasks::"
    "provides_info_about_current_execution_state": "Strawberry's executor hands resolvers its "
    "own GraphQLResolveInfo (operation context aware, variables as a plain dict of coerced "
    "values), which does not compare equal to graphql-core's",
}


@dataclass(frozen=True)
class Case:
    id: str
    function: Callable[..., Any]
    kwargs: dict[str, Any]
    filters: tuple[str, ...]


def _locals_of(describe: Callable[[], Any]) -> dict[str, Any]:
    """A describe block's local functions: pytest-describe's way (run it, keep its frame's
    locals at return)."""
    found: dict[str, Any] = {}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code is describe.__code__:
            found.update(frame.f_locals)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        describe()
    finally:
        sys.setprofile(previous)
    return found


def _marks(*holders: Any) -> list[Any]:
    """The pytest marks on a module, describe blocks and a function (Mark objects)."""
    marks = []
    for holder in holders:
        if isinstance(holder, dict):
            found = holder.get("pytestmark", [])
        else:
            found = getattr(holder, "pytestmark", [])
        for mark in found if isinstance(found, list | tuple) else [found]:
            marks.append(getattr(mark, "mark", mark))
    return marks


def _expand(name: str, function: Any, *holders: Any) -> Iterator[Case]:
    marks = _marks(*holders, function)
    filters = tuple(m.args[0] for m in marks if m.name == "filterwarnings")
    grids = []
    for mark in (m for m in marks if m.name == "parametrize"):
        spec = mark.args[0]
        names = [n.strip() for n in spec.split(",")] if isinstance(spec, str) else list(spec)
        rows = [v if len(names) > 1 else (v,) for v in mark.args[1]]
        grids.append([dict(zip(names, row, strict=True)) for row in rows])
    for combo in itertools.product(*grids):
        kwargs = {k: v for part in combo for k, v in part.items()}
        if set(inspect.signature(function).parameters) - set(kwargs):
            continue  # wants a pytest fixture: not run here (none of the copied files do)
        suffix = ",".join(f"{k}={v}" for k, v in kwargs.items())
        yield Case(f"{name}[{suffix}]" if suffix else name, function, kwargs, filters)


def _collect(module_name: str) -> list[Case]:
    module = importlib.import_module(f"{UPSTREAM}.{module_name}")
    cases: list[Case] = []

    def visit(prefix: str, namespace: dict[str, Any], holders: tuple[Any, ...]) -> None:
        for name, value in namespace.items():
            if not inspect.isfunction(value) or name.startswith("_"):
                continue
            if name.startswith("describe_"):
                inner = _locals_of(value)
                visit(f"{prefix}{name}::", inner, (*holders, inner))
            elif value.__module__ == module.__name__:
                cases.extend(_expand(f"{prefix}{name}", value, *holders))

    top = {k: v for k, v in vars(module).items() if k.startswith(("describe_", "test_"))}
    visit(f"{module_name}::", top, (module,))
    return cases


CASES = [case for name in MODULES for case in _collect(name)]


def _apply_filter(spec: str) -> None:
    action, message, category, *_ = [*spec.split(":"), "", "", ""]
    kind: type[Warning] = Warning
    if category:
        kind = getattr(__import__("builtins"), category, None) or Warning
    warnings.filterwarnings(action, message=message, category=kind)  # type: ignore[arg-type]


async def _outcome(case: Case, executor: type) -> str | None:
    """None when the upstream test passes with `executor` as graphql-core's default, else
    the failure's first line."""
    original = graphql_execute.IncrementalExecutor
    graphql_execute.IncrementalExecutor = executor  # type: ignore[misc]
    try:
        with warnings.catch_warnings():
            for spec in case.filters:
                _apply_filter(spec)
            result = case.function(**case.kwargs)
            if inspect.isawaitable(result):
                await result
    except BaseException as exc:  # an assertion, or anything the test did not expect
        if isinstance(exc, KeyboardInterrupt):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"{type(exc).__name__}: {re.sub(r'(0x)?[0-9a-f]{6,}', '#', first)}"
    finally:
        graphql_execute.IncrementalExecutor = original  # type: ignore[misc]
    return None


def test_the_upstream_tests_were_collected() -> None:
    assert len(CASES) > 250, len(CASES)
    assert any("Must provide operation name" in inspect.getsource(c.function) for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_upstream_case(case: Case) -> None:
    strawberry = await _outcome(case, BaseExecutor)
    fast = await _outcome(case, FastExecutor)
    assert fast == strawberry, f"fast: {fast}\nStrawberry's executor: {strawberry}"
    if strawberry is not None:
        assert case.id in STRAWBERRY_DIFFERS, strawberry
    else:
        assert case.id not in STRAWBERRY_DIFFERS, "passes now: drop it from STRAWBERRY_DIFFERS"
