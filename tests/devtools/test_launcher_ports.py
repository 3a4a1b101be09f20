"""No doc hard-codes a port the launcher may change (issue 20).

`make run` prefers the API on PORT (8000), PostgreSQL on 55432 and Redis on 56379, and takes
the next free port when one is busy, saying so in its log. A doc that gives one of those
addresses as the address sends a newcomer with a second checkout to the wrong server: every
paragraph naming one must also say it may move (busy) or point to what the launcher printed.
The ports are read from the code, so a new default is checked too.
"""

from __future__ import annotations

import re
from pathlib import Path

from app.config import PROJECT_ROOT
from devtools import provision
from devtools.launcher import LauncherSettings

# Words that tell the reader the address is the launcher's choice, not a constant.
QUALIFIERS = re.compile(r"\bbusy\b|\bprint(?:s|ed)\b|\bmove[sd]?\b", re.IGNORECASE)


def launcher_ports() -> list[int]:
    return [LauncherSettings.model_fields["port"].default, provision.PG_PORT, provision.REDIS_PORT]


def docs() -> list[Path]:
    """The prose a newcomer reads; decisions are dated records and stay as written."""
    found = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]
    return [p for p in found if "decisions" not in p.relative_to(PROJECT_ROOT).parts]


def unqualified(text: str, ports: list[int]) -> list[str]:
    """Paragraphs that give a local address on one of `ports` without saying it may move."""
    local = re.compile(r"(?:127\.0\.0\.1|localhost):(" + "|".join(str(p) for p in ports) + r")\b")
    return [
        paragraph.strip()
        for paragraph in re.split(r"\n\s*\n", text)
        if local.search(paragraph) and not QUALIFIERS.search(paragraph)
    ]


def test_no_doc_names_a_launcher_port_as_fixed() -> None:
    ports = launcher_ports()
    assert ports == [8000, 55432, 56379]  # what the launcher prefers today
    offenders = {
        str(path.relative_to(PROJECT_ROOT)): found
        for path in docs()
        if (found := unqualified(path.read_text(), ports))
    }
    assert not offenders, offenders


def test_the_check_catches_a_fixed_address() -> None:
    ports = launcher_ports()
    fixed = "Open http://127.0.0.1:8000/ in a browser.\n\nThen log in."
    assert unqualified(fixed, ports) == ["Open http://127.0.0.1:8000/ in a browser."]
    assert unqualified("Redis at redis://localhost:56379/0.", ports)
    said = "Open http://127.0.0.1:8000/ (unless port 8000 was busy: the launcher prints it)."
    assert unqualified(said, ports) == []
    assert unqualified("A benchmark's own Redis on 127.0.0.1:6390.", ports) == []
