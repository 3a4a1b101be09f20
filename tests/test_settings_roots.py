"""Settings reach the service's modules from the roots (docs/ARCHITECTURE.md, "Settings"):
only the composition root, the ASGI app, the ARQ worker settings and programs' entry modules
call `get_settings()` (or the uncached `read_settings()`) or build `Settings` themselves;
every other module of app/ and jobs/ is handed its settings (an argument,
`AppState.settings`, the worker's `ctx["state"]`).

Read from the source with `ast` (no import): a call anywhere in a module counts, in a
function or not, under any alias the module imported it as."""

from __future__ import annotations

import ast

from app.config import PROJECT_ROOT

ROOTS = {
    "app/state.py",  # the composition root: create_state()
    "app/web.py",  # the ASGI app uvicorn imports: create_app()
    "jobs/worker.py",  # ARQ reads its settings classes at import
}
SERVICE = ("app", "jobs")
SETTINGS_NAMES = {"get_settings", "read_settings", "get_faults", "Settings"}


def _is_program(tree: ast.Module) -> bool:
    """An entry module: `python -m` runs it (a `__main__.py`, or an `if __name__ ==
    "__main__":` at the top level)."""
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            left = node.test.left
            if isinstance(left, ast.Name) and left.id == "__name__":
                return True
    return False


def settings_calls(source: str) -> list[int]:
    """Lines where a module calls `get_settings()`, `read_settings()` or `Settings(...)` from
    app.config."""
    tree = ast.parse(source)
    local: set[str] = set()
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "app.config":
            local |= {a.asname or a.name for a in node.names if a.name in SETTINGS_NAMES}
        elif isinstance(node, ast.ImportFrom) and node.module == "app":
            modules |= {a.asname or a.name for a in node.names if a.name == "config"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "app.config"}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Name) and func.id in local) or (
            isinstance(func, ast.Attribute)
            and func.attr in SETTINGS_NAMES
            and ast.unparse(func.value) in modules
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_only_roots_read_the_settings() -> None:
    offenders = []
    for top in SERVICE:
        for path in sorted((PROJECT_ROOT / top).rglob("*.py")):
            rel = path.relative_to(PROJECT_ROOT).as_posix()
            source = path.read_text()
            if rel in ROOTS or rel == "app/config.py" or path.name == "__main__.py":
                continue
            if _is_program(ast.parse(source)):
                continue
            offenders += [f"{rel}:{line}" for line in settings_calls(source)]
    assert not offenders, (
        "these modules read the settings themselves; hand them the settings instead "
        f"(an argument, AppState.settings, ctx['state'].settings): {offenders}"
    )


def test_the_check_sees_every_spelling() -> None:
    """The check itself: a direct call, an alias, a module attribute, a constructor."""
    found = settings_calls(
        "from app.config import get_settings as gs, Settings\n"
        "import app.config\n"
        "from app import config\n"
        "def f():\n"
        "    return gs().port\n"
        "X = app.config.get_settings()\n"
        "Y = Settings()\n"
        "Z = config.get_settings()\n"
        "def g(settings: Settings) -> int:\n"
        "    return settings.port\n"
    )
    assert found == [5, 6, 7, 8]
    assert _is_program(ast.parse("def main(): ...\nif __name__ == '__main__':\n    main()\n"))
    assert not _is_program(ast.parse("def main(): ...\n"))
