"""The realtime package's layout as docs/ARCHITECTURE.md states it (decision 0072): the hub
is routing only, its parts are a module each, and the package's fixed numbers sit in
constants.py (the live counts' own aside), not as knobs scattered through its modules.

Read from the source with `ast` (no import)."""

from __future__ import annotations

import ast

from app.config import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "app" / "realtime"
HUB_PARTS = ("subscriber", "pubsub", "delivery", "follows", "heap", "constants")
OWN_NUMBERS = {"counts.py", "constants.py"}  # the count scripts keep theirs (ARCHITECTURE.md)


def _numeric(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    if isinstance(node, ast.Tuple):
        return bool(node.elts) and all(_numeric(e) for e in node.elts)
    return False


def test_the_hubs_parts_are_a_module_each_and_named_in_the_architecture() -> None:
    text = (PROJECT_ROOT / "docs" / "ARCHITECTURE.md").read_text()
    for part in HUB_PARTS:
        assert (PACKAGE / f"{part}.py").is_file(), part
        assert f"`{part}.py`" in text, part
    assert len((PACKAGE / "hub.py").read_text().splitlines()) <= 420  # routing only


def test_numbers_are_named_in_constants_not_scattered() -> None:
    found = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name in OWN_NUMBERS:
            continue
        for node in ast.parse(path.read_text()).body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if value is not None and _numeric(value):
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], f"numeric module constants outside constants.py: {found}"
