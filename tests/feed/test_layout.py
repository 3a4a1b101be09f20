"""app/feed's layout as docs/ARCHITECTURE.md draws it ("Inside app/feed", decision 0069):
every module of the read path named there and none that is gone, none over ~500 lines, and
the façade thin (a stage that grows goes into its own module, not back into the façade)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FEED = ROOT / "app" / "feed"


def _drawn() -> set[str]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = text.split("### Inside app/feed", 1)[1].split("```", 2)[1]
    return set(re.findall(r"\b([a-z_]+\.py)\b", block))


def test_every_module_of_app_feed_is_drawn_and_every_drawn_one_exists() -> None:
    modules = {path.name for path in FEED.glob("*.py")} - {"__init__.py"}
    assert _drawn() == modules


def test_no_module_of_app_feed_is_over_500_lines_and_the_facade_is_thin() -> None:
    sizes = {path.name: len(path.read_text().splitlines()) for path in FEED.glob("*.py")}
    assert max(sizes.values()) <= 500, sizes
    assert sizes["service.py"] <= 250, sizes["service.py"]
