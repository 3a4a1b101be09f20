"""docs/API.md and the README must not drift from the code, and the README's commands must work.

docs/API.md is the API reference a clone carries: its schema block must equal the exported
SDL (which tests/api/endpoint/test_schema_sdl.py holds equal to the code), every root field
needs a row in its operation tables, and every error code and setting must be documented,
defaults included.
The README's quick commands run here (the bulk-seed one, slower, in tests/devtools/test_seed.py).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from graphql import (
    GraphQLObjectType,
    build_schema,
    lexicographic_sort_schema,
    print_schema,
)
from pydantic_settings import BaseSettings

from app import errors
from app.api.endpoint.export_schema import SDL_PATH
from app.config import PROJECT_ROOT, Settings
from app.operation_documents import OPERATIONS_DIR
from app.probe.settings import ProbeSettings
from tests.helpers import readme_bulk_seed_command

API_DOC = PROJECT_ROOT / "docs" / "API.md"
README = PROJECT_ROOT / "README.md"
MAKEFILE = PROJECT_ROOT / "Makefile"


def _doc() -> str:
    return API_DOC.read_text()


def _section(text: str, heading: str) -> str:
    """The body of a `## heading` section (up to the next `## `)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/API.md has no '## {heading}' section"
    return match.group(1)


def _table_rows(text: str) -> dict[str, str]:
    """Markdown table rows by each `name` in their first cell (the part before any `(`)."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        cells = line.split("|")
        if not line.startswith("|") or len(cells) < 3:
            continue
        for name in re.findall(r"`([^`(]+)", cells[1]):
            rows.setdefault(name.strip(), line)
    return rows


def _sorted_sdl(sdl: str) -> str:
    return print_schema(lexicographic_sort_schema(build_schema(sdl)))


# ---------------------------------------------------------------------------- schema, operations


def test_schema_block_equals_the_exported_sdl() -> None:
    block = re.search(r"```graphql\n(.*?)```", _section(_doc(), "Schema"), re.S)
    assert block, "docs/API.md '## Schema' has no ```graphql block"
    assert _sorted_sdl(block.group(1)) == _sorted_sdl(SDL_PATH.read_text()), (
        "docs/API.md's schema block differs from graphql/schema.graphql: copy the file into it"
    )


def test_every_root_field_and_argument_has_a_row() -> None:
    schema = build_schema(SDL_PATH.read_text())
    operations = _section(_doc(), "Operations")
    missing = []
    for root in (schema.query_type, schema.mutation_type, schema.subscription_type):
        assert isinstance(root, GraphQLObjectType)
        section = re.search(rf"^### {root.name}\n(.*?)(?=^### |\Z)", operations, re.M | re.S)
        rows = _table_rows(section.group(1)) if section else {}
        for name, field in root.fields.items():
            row = rows.get(name)
            if row is None:
                missing.append(f"{root.name}.{name}")
                continue
            first_cell = row.split("|")[1]
            missing += [
                f"{root.name}.{name}({arg})"
                for arg in field.args
                if not re.search(rf"\b{arg}\b", first_cell)
            ]
    assert not missing, f"not documented in docs/API.md '## Operations': {missing}"


def test_every_operation_document_is_listed() -> None:
    table = _section(_doc(), "Operations")
    for path in sorted(OPERATIONS_DIR.glob("*.graphql")):
        assert f"`{path.name}`" in table, path.name
        names = re.findall(
            r"^(?:query|mutation|subscription|fragment)\s+(\w+)", path.read_text(), re.M
        )
        for name in names:
            assert f"`{name}`" in table, f"{path.name}: {name} is not listed in docs/API.md"


# ---------------------------------------------------------------------------- errors


def _error_codes() -> set[str]:
    codes = {"INTERNAL", "BAD_USER_INPUT"}  # also set outside AppError (app/api/endpoint/schema.py)
    pending: list[type[errors.AppError]] = [errors.AppError]
    while pending:
        cls = pending.pop()
        codes.add(cls.code)
        pending.extend(cls.__subclasses__())
    codes.update(getattr(errors, "ERROR_CODES", ()))
    return codes


def test_every_error_code_is_documented() -> None:
    rows = _table_rows(_section(_doc(), "Errors"))
    missing = sorted(_error_codes() - set(rows))
    assert not missing, f"add these codes to docs/API.md '## Errors': {missing}"


# ---------------------------------------------------------------------------- configuration


def _documented_default(value: object) -> str | None:
    """How a default reads in the doc's table; None when it is not a plain value."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return None


@pytest.mark.parametrize("settings_class", [Settings, ProbeSettings])
def test_every_setting_is_documented_with_its_default(
    settings_class: type[BaseSettings],
) -> None:
    rows = _table_rows(_section(_doc(), "Configuration"))
    prefix = str(settings_class.model_config.get("env_prefix") or "").upper()
    problems = []
    for name, info in settings_class.model_fields.items():
        env = prefix + name.upper()
        row = rows.get(env)
        if row is None:
            problems.append(f"{env}: no row")
            continue
        default = _documented_default(info.default)
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if default is not None and cells[1] != default:
            problems.append(f"{env}: documented default {cells[1]!r}, code has {default!r}")
    assert not problems, f"docs/API.md '## Configuration': {problems}"


# ---------------------------------------------------------------------------- README


@pytest.mark.parametrize("document", [README, API_DOC], ids=lambda p: p.name)
def test_links_resolve_inside_the_repository(document: Path) -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", document.read_text())
    local = [link for link in links if "://" not in link]
    assert local, f"{document.name} links to other documents"
    for link in local:
        target = (document.parent / link).resolve()
        assert target.is_relative_to(PROJECT_ROOT), f"{link} points outside the repository"
        assert target.exists(), f"{document.name} links to {link}, which does not exist"


def test_readme_make_targets_exist() -> None:
    targets = set(re.findall(r"^([a-z][\w-]*):", MAKEFILE.read_text(), re.M))
    used = set(re.findall(r"`make ([a-z][\w-]*)", README.read_text()))
    assert {"run", "test"} <= used
    assert used <= targets, f"the README names make targets the Makefile lacks: {used - targets}"


def _readme_python_modules() -> list[str]:
    modules = re.findall(r"\.venv/bin/python -m ([\w.]+)", README.read_text())
    return sorted(set(modules))


def test_readme_python_commands_answer_help() -> None:
    """Every `.venv/bin/python -m <module>` the README names exists and parses its arguments
    (the bulk seed itself runs in tests/devtools/test_seed.py)."""
    modules = _readme_python_modules()
    assert "devtools.launcher" in modules and "devtools.seed" in modules
    for module in modules:
        done = subprocess.run(
            [sys.executable, "-m", module, "--help"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"python -m {module} --help:\n{done.stdout}{done.stderr}"
        assert "usage" in done.stdout.lower(), module


def test_readme_commands_use_the_venv() -> None:
    """Commands a reader copies run the project's interpreter, not whatever python is first."""
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] in ("python", "python3"):
                raise AssertionError(f"use .venv/bin/python in the README: {line}")


def test_readme_bulk_seed_command_shape() -> None:
    argv = readme_bulk_seed_command()
    assert argv[:4] == [".venv/bin/python", "-m", "devtools.seed", "bulk"]
    assert "--force" in argv, "the dev database holds the demo data after `make run`"
