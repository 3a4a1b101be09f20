"""`python -m benchmarks.media_pages` end to end at a tiny size, as the user runs it: seeding,
the API process, the in-process query count, the load (httpx clients: the tiny size needs no
wrk). Asserts what it measured is what it claims: every page answered by the compiled path,
with 4 images per post in one set and none in the other, one media query per page in both,
under three queries per page for 15 posts; not how fast."""

from __future__ import annotations

import json
import subprocess
import sys

from app.config import PROJECT_ROOT
from tests.benchmarks.test_report_smoke import _service_defaults


def test_the_media_pages_benchmark_measures_what_it_says() -> None:
    argv = [sys.executable, "-m", "benchmarks.media_pages", "--rounds", "1", "--seconds", "1",
            "--authors", "3", "--posts-per-author", "5", "--viewers", "3", "--count-pages", "3",
            "--connections", "2", "--load", "python"]  # fmt: skip
    done = subprocess.run(
        argv, cwd=PROJECT_ROOT, env=_service_defaults(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("MEDIA_PAGES_RESULT "))
    none, four = json.loads(line.removeprefix("MEDIA_PAGES_RESULT "))["rows"]
    assert (none["images_per_post"], four["images_per_post"]) == (0, 4)
    assert none["images_per_page"] == 0 and four["images_per_page"] == 4 * 15  # 15 posts
    assert none["compiled_pages"] == four["compiled_pages"] == "3/3"
    # At most one (the posts a process has read before cost none: app.media.hydrate).
    assert none["media_queries_per_page"] == four["media_queries_per_page"] <= 1.0
    # The page's rows and its media, now and then a write beside them: never one per post.
    assert none["queries_per_page"] < 3 and four["queries_per_page"] < 3
    assert none["pages"] > 0 and four["pages"] > 0 and none["errors"] == four["errors"] == 0
    assert "| images/post |" in done.stdout  # the table
