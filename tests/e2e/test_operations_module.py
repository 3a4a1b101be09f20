"""frontend-demo/operations.js is generated from graphql/operations/*.graphql and committed
(the demo has no build step): it must match what build_operations.py renders now."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from types import ModuleType

from graphql import OperationDefinitionNode, parse

from app.config import PROJECT_ROOT
from app.operation_documents import OPERATIONS_DIR, operations

BUILD_SCRIPT = PROJECT_ROOT / "frontend-demo" / "build_operations.py"


def _build_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_operations", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_operations_module_is_fresh() -> None:
    build = _build_module()
    fix = "run: .venv/bin/python frontend-demo/build_operations.py"
    assert build.TARGET.exists(), fix
    assert build.TARGET.read_text() == build.render(), f"operations.js is stale; {fix}"


def test_every_document_is_in_the_module() -> None:
    text = (PROJECT_ROOT / "frontend-demo" / "operations.js").read_text()
    for name in operations():
        assert f"  {name}: " in text, name


def test_operation_names_are_unique_across_files() -> None:
    """operations() keys by name: a second definition would silently replace the first."""
    names: Counter[str] = Counter()
    for path in sorted(OPERATIONS_DIR.glob("*.graphql")):
        for definition in parse(path.read_text()).definitions:
            if isinstance(definition, OperationDefinitionNode) and definition.name:
                names[definition.name.value] += 1
    assert [name for name, n in names.items() if n > 1] == []


CALL = re.compile(
    r"\b(?:call|run|act|gql)\(\s*(?:\w+\s*\?\s*)?'([A-Z]\w+)'(?:\s*:\s*'([A-Z]\w+)')?"
)
DEFAULT_OPERATION = re.compile(r"operation = '([A-Z]\w+)'")


def test_the_demo_sends_only_known_operations() -> None:
    """Every operation name the page passes to call/run/act names a real document."""
    used: set[str] = set()
    for path in (PROJECT_ROOT / "frontend-demo" / "js").rglob("*.js"):
        source = path.read_text()
        for match in CALL.finditer(source):
            used |= {name for name in match.groups() if name}
        used |= set(DEFAULT_OPERATION.findall(source))
    assert {"Feed", "FeedUpdates", "CreatePost", "LikePost", "UnlikePost", "Block"} <= used
    assert sorted(used - set(operations())) == []
