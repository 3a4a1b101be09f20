"""docs/ARCHITECTURE.md stays true to the code: every path and module it names exists, every
name it places in a file is defined there, and every module of app/ or jobs/ past the size a
reader takes in at once is listed with the sentence that says why it is still one concept."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from app.config import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "ARCHITECTURE.md"
# A module past this many lines needs its row under "## Large modules".
LARGE_MODULE_LINES = 500
# Paths that exist in the built wheel only (docs/decisions/0075).
WHEEL_ONLY = ("app/_shipped",)
PATH = re.compile(r"`((?:app|jobs|tests|docs|devtools|benchmarks|graphql|migrations)/[^`\s]*)`")
MODULE = re.compile(r"`((?:app|jobs)(?:\.[a-z_][a-z0-9_]*)+)`")
# "`name` in `app/x.py`" or "`name` (`app/x.py`)": the doc places a definition in a file.
PLACED = re.compile(r"`([A-Za-z_][A-Za-z0-9_.]*)`(?: in |, | \()`((?:app|jobs)/[^`]+\.py)`")


def _text() -> str:
    return DOC.read_text()


@cache
def _defined(path: Path) -> frozenset[str]:
    """Names a module defines (functions, classes, assignments) or imports: the page may say
    where a name is defined or where another package's name is used."""
    names: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom | ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def _module_path(dotted: str) -> Path | None:
    base = PROJECT_ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def test_every_path_the_page_names_exists() -> None:
    missing = []
    for raw in set(PATH.findall(_text())):
        path = raw.split("#")[0].rstrip("/.,:;")
        if any(ch in path for ch in "*{<") or path.startswith(WHEEL_ONLY):
            continue
        if not (PROJECT_ROOT / path).exists():
            missing.append(raw)
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {sorted(missing)}"


def test_every_module_the_page_names_exists() -> None:
    missing = []
    for dotted in set(MODULE.findall(_text())):
        parts = dotted.split(".")
        # `app.web:app` style or a trailing attribute: the longest prefix that is a module.
        found = any(_module_path(".".join(parts[:n])) for n in range(len(parts), 1, -1))
        if not found:
            missing.append(dotted)
    assert not missing, f"docs/ARCHITECTURE.md names modules that do not exist: {sorted(missing)}"


def test_every_name_placed_in_a_file_is_defined_there() -> None:
    wrong = []
    for name, raw in PLACED.findall(_text()):
        path = PROJECT_ROOT / raw
        if not path.is_file():
            continue  # the path test says so
        if name.split(".")[0] not in _defined(path):
            wrong.append(f"`{name}` in `{raw}`")
    assert not wrong, f"docs/ARCHITECTURE.md places names where they are not defined: {wrong}"


def _large_modules() -> dict[str, int]:
    found = {}
    for package in ("app", "jobs"):
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > LARGE_MODULE_LINES:
                found[str(path.relative_to(PROJECT_ROOT))] = lines
    return found


def test_every_large_module_says_why_it_is_one_concept() -> None:
    text = _text()
    assert "## Large modules" in text, "docs/ARCHITECTURE.md needs a '## Large modules' section"
    section = text.split("## Large modules", 1)[1].split("\n## ", 1)[0]
    unexplained = [
        f"{path} ({lines} lines)"
        for path, lines in _large_modules().items()
        if f"`{path}`" not in section
    ]
    assert not unexplained, (
        f"modules over {LARGE_MODULE_LINES} lines without a row under '## Large modules' in "
        f"docs/ARCHITECTURE.md saying why each is one concept (or split them): {unexplained}"
    )
    stale = [
        path
        for path in re.findall(r"`((?:app|jobs)/[^`]+\.py)`", section)
        if path not in _large_modules()
    ]
    assert not stale, f"'## Large modules' lists modules no longer over the size: {stale}"
