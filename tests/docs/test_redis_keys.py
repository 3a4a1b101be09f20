"""docs/redis-keys.md is the list of every Redis key family: the code may build no other,
each family only in its owner module, and the list names nothing the code does not build."""

from __future__ import annotations

import ast
import re

from app.config import PROJECT_ROOT

DOC = PROJECT_ROOT / "docs" / "redis-keys.md"
SCANNED = ("app", "jobs")
# What a key, channel or job id starts with: a lowercase name and a colon ("tl:", "arq:").
PREFIX = re.compile(r"^([a-z][a-z0-9_-]*):")
LOOK_ALIKES = "Look-alikes"


def _rows() -> list[tuple[str, set[str], str]]:
    """(section, prefixes, owner path) per table row of the document."""
    rows = []
    section = ""
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or not cells[0].startswith("`"):
            continue
        prefixes = {
            m.group(1) for name in re.findall(r"`([^`]+)`", cells[0]) if (m := PREFIX.match(name))
        }
        owner = cells[1] if section == LOOK_ALIKES else cells[2]
        rows.append((section, prefixes, owner.strip("`")))
    return rows


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _literal_prefixes() -> dict[tuple[str, str], int]:
    """(prefix, file) -> line of each string literal (or f-string start) that looks like a
    key, in the scanned packages; docstrings and URLs are not keys."""
    found: dict[tuple[str, str], int] = {}
    for package in SCANNED:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            skip = _docstrings(tree)
            for node in ast.walk(tree):
                text = None
                if isinstance(node, ast.JoinedStr) and node.values:
                    first = node.values[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        text = first.value
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = None if id(node) in skip else node.value
                if text is None or "://" in text:
                    continue
                match = PREFIX.match(text)
                if match:
                    rel = path.relative_to(PROJECT_ROOT).as_posix()
                    found.setdefault((match.group(1), rel), node.lineno)
    return found


def test_the_document_lists_families_with_owners() -> None:
    rows = _rows()
    assert len(rows) >= 10, "the tables of docs/redis-keys.md were not found"
    for section, prefixes, owner in rows:
        assert prefixes, f"{section}: a row names no key prefix"
        assert (PROJECT_ROOT / owner).is_file(), f"{section}: owner {owner} is not a file"


def test_every_key_literal_is_listed_with_its_owner() -> None:
    allowed = {(p, owner) for _, prefixes, owner in _rows() for p in prefixes}
    unlisted = [
        f"{path}:{line}: '{prefix}:...'"
        for (prefix, path), line in sorted(_literal_prefixes().items())
        if (prefix, path) not in allowed
    ]
    assert not unlisted, (
        "strings that look like Redis keys outside docs/redis-keys.md (list the family with "
        "this module as its owner, or build the key through its owner): " + ", ".join(unlisted)
    )


def test_every_listed_family_is_built_by_its_owner() -> None:
    built = set(_literal_prefixes())
    stale = [
        f"{section}: '{prefix}:' in {owner}"
        for section, prefixes, owner in _rows()
        for prefix in prefixes
        if (prefix, owner) not in built
    ]
    assert not stale, "docs/redis-keys.md lists keys the code does not build: " + ", ".join(stale)


ROLE_SETTINGS = {f"`REDIS_{r}_URL`" for r in ("TIMELINES", "SESSIONS", "QUEUE", "PUBSUB", "LIMITS")}


def test_every_family_names_its_redis_role() -> None:
    """The last column of the key, channel and job-id tables is one of the five role
    settings (decision 0041)."""
    section, named = "", 0
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        if section == LOOK_ALIKES or not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert cells[-1] in ROLE_SETTINGS, f"{section}: {cells[0]} names no role: {cells[-1]}"
        named += 1
    assert named >= 30
