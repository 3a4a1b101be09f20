"""Every figure the README repeats comes from docs/benchmarks/ (the current figures in
README.md, every run in archive.md, the committed run of `make bench` in celebrity.md), word
for word.

The README's figures once outlived the code that produced them (older layouts, older paths,
ranges no run in the benchmarks showed). A figure here is a number with a unit or a ratio
(`245 ms`, `1.28x`, `204k/s`, `9.03 B`, `32-46 us`); a figure the benchmarks do not contain
verbatim fails this test, so the README can only quote a measured run.
"""

from __future__ import annotations

import re

import pytest

from app.config import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
BENCHMARKS = PROJECT_ROOT / "docs" / "benchmarks"


def benchmarks_text() -> str:
    """Every page of docs/benchmarks/."""
    return "\n".join(page.read_text() for page in sorted(BENCHMARKS.glob("*.md")))


_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_UNIT = r"(?:ms|us|µs|s|B|KB|MB|GB|%|x|×|k/s|(?:req|pages|inserts)/s)"
FIGURE = re.compile(rf"(?<![\w.,/-]){_NUMBER}(?:[-–]{_NUMBER})?\s?{_UNIT}(?![\w/])")


def figures(text: str) -> list[str]:
    """Numbers with a unit or a ratio, ranges included, in the order they appear."""
    return FIGURE.findall(text)


def missing_figures(readme: str, benchmarks: str) -> list[str]:
    return [figure for figure in figures(readme) if figure not in benchmarks]


def test_every_readme_figure_is_in_the_benchmarks() -> None:
    readme = README.read_text()
    assert figures(readme), "the README quotes no figure: this test would check nothing"
    missing = missing_figures(readme, benchmarks_text())
    assert not missing, f"README.md figures that docs/benchmarks/ does not contain: {missing}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("in 245 ms, 1.28x faster", ["245 ms", "1.28x"]),
        ("204k/s and 9.03 B per entry", ["204k/s", "9.03 B"]),
        ("32-46 us a frame, 19,900 sockets at 52 KB", ["32-46 us", "52 KB"]),
        ("943 pages/s, 12 %", ["943 pages/s", "12 %"]),
        ("decision 0007, p99, 2-core, 50,000 followers, x-ray, 3 sockets", []),
    ],
)
def test_figures_are_found(text: str, expected: list[str]) -> None:
    assert figures(text) == expected


def test_a_figure_missing_from_the_benchmarks_is_reported() -> None:
    readme = README.read_text() + "\nFan-out at 204k/s, one post in 9,876 ms.\n"
    missing = missing_figures(readme, benchmarks_text())
    assert missing == ["204k/s", "9,876 ms"]
