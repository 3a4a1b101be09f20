"""docs/API.md "Clients": each code block that starts with a file's path is that file, byte for
byte, and the files tests/clients runs are all shown there (the Apollo Client 4 recipe run by
tests/clients/test_apollo_recipe.py, the codegen config compiled by test_codegen.py)."""

from __future__ import annotations

import re

from app.config import PROJECT_ROOT

API_DOC = PROJECT_ROOT / "docs" / "API.md"
APOLLO_DIR = PROJECT_ROOT / "tests" / "clients" / "apollo"
# The recipe's files: what the docs show and the client test runs.
RUN_BY_THE_TESTS = {"client.mjs", "feed.mjs", "codegen.ts"}
BLOCK = re.compile(r"^```[a-z]*\n(.*?)^```$", re.M | re.S)
PATH_LINE = re.compile(r"^(?://|#) (tests/clients/\S+)\n")


def clients_section() -> str:
    text = API_DOC.read_text()
    start = text.index("\n## Clients\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def shown_files() -> dict[str, str]:
    """Path -> block, for every block of the section whose first line names a file."""
    shown: dict[str, str] = {}
    for block in BLOCK.findall(clients_section()):
        named = PATH_LINE.match(block)
        if named:
            assert named.group(1) not in shown, f"{named.group(1)} shown twice"
            shown[named.group(1)] = block
    return shown


def test_every_named_block_is_its_file() -> None:
    shown = shown_files()
    assert shown, "no block in 'Clients' names its file"
    for path, block in shown.items():
        file = PROJECT_ROOT / path
        assert file.is_file(), f"docs/API.md shows {path}, which does not exist"
        assert block == file.read_text(), f"docs/API.md's block differs from {path}: copy it over"


def test_the_files_the_client_tests_run_are_shown() -> None:
    shown = {path.rsplit("/", 1)[-1] for path in shown_files()}
    assert shown >= RUN_BY_THE_TESTS, f"not in docs/API.md 'Clients': {RUN_BY_THE_TESTS - shown}"
    driver = (APOLLO_DIR / "run.mjs").read_text()
    for recipe in ("client.mjs", "feed.mjs"):
        assert f"from './{recipe}'" in driver, f"run.mjs does not run {recipe}"
    codegen_test = (PROJECT_ROOT / "tests" / "clients" / "test_codegen.py").read_text()
    assert '"--config", "codegen.ts"' in codegen_test, "test_codegen.py runs another config"
