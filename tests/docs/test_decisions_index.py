"""docs/decisions/README.md lists every decision note with the title and status the note has.

A note starts with `Status: accepted`, `Status: superseded by NNNN` or `Status: partly
superseded by NNNN[, NNNN]` (before or after its `# NNNN: Title` line); its row in the index is
rendered from the note (`index_row`), so a new or changed note fails here with the exact row to
paste. Without the index, what replaced 0060 (0064) was only in 0064's prose.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.config import PROJECT_ROOT

DECISIONS = PROJECT_ROOT / "docs" / "decisions"
INDEX = DECISIONS / "README.md"
TITLE = re.compile(r"^# (\d{4})(?::| —) (.+)$", re.M)
STATUS = re.compile(
    r"^Status: (accepted|superseded by|partly superseded by)(?: (\d{4}(?:, \d{4})*))?$"
)
ROW = re.compile(r"^\| \[(\d{4})\]")


def notes() -> dict[str, Path]:
    """Number -> the note's file."""
    return {path.name[:4]: path for path in sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))}


def status_of(path: Path) -> tuple[str, list[str]]:
    """(accepted | superseded | partly superseded, the numbers that supersede it)."""
    head = path.read_text().splitlines()[:5]
    found = [m for line in head if (m := STATUS.match(line))]
    assert found, f"{path.name}: no `Status: ...` line in its first lines"
    kind, numbers = found[0].group(1), found[0].group(2)
    if kind == "accepted":
        assert numbers is None, f"{path.name}: accepted, yet names {numbers}"
        return "accepted", []
    assert numbers, f"{path.name}: `{kind}` names no decision"
    return kind.removesuffix(" by"), numbers.split(", ")


def index_row(path: Path, files: dict[str, Path]) -> str:
    """The index's row of one note: number (linked), title, status, superseded by (linked)."""
    match = TITLE.search(path.read_text())
    assert match and match.group(1) == path.name[:4], f"{path.name}: no `# NNNN: Title` line"
    title = match.group(2).replace("|", "\\|")
    kind, by = status_of(path)
    missing = [n for n in by if n not in files]
    assert not missing, f"{path.name} is superseded by notes that do not exist: {missing}"
    links = ", ".join(f"[{n}]({files[n].name})" for n in by)
    row = f"| [{path.name[:4]}]({path.name}) | {title} | {kind} |"
    return row + (f" {links} |" if links else " |")


def index_rows() -> dict[str, str]:
    """Number -> row, as the index has them (in the index's order)."""
    return {m.group(1): line for line in INDEX.read_text().splitlines() if (m := ROW.match(line))}


def test_every_note_has_its_row() -> None:
    files, rows = notes(), index_rows()
    for number, path in files.items():
        expected = index_row(path, files)
        assert rows.get(number) == expected, (
            f"docs/decisions/README.md: {'replace the row of' if number in rows else 'add'} "
            f"{number} with\n{expected}"
        )


def test_every_row_has_a_note_and_rows_run_in_order() -> None:
    files, rows = notes(), index_rows()
    assert not set(rows) - set(files), (
        f"index rows without a note: {sorted(set(rows) - set(files))}"
    )
    assert list(rows) == sorted(rows), "docs/decisions/README.md: rows in number order"


def test_the_index_catches_a_missing_row_and_a_wrong_status(tmp_path: Path) -> None:
    note = tmp_path / "0099-an-example.md"
    note.write_text("Status: superseded by 0001\n\n# 0099: An example\n")
    files = {**notes(), "0099": note}
    row = index_row(note, files)
    assert row == (
        f"| [0099](0099-an-example.md) | An example | superseded | [0001]({files['0001'].name}) |"
    )
    note.write_text("# 0099 — An example\n\nStatus: accepted\n")
    assert index_row(note, files) == "| [0099](0099-an-example.md) | An example | accepted | |"
