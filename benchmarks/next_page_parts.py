"""The Python-only parts of a registered next page that decision 0056 changed, in process:
µs of CPU per 20-post page for each, from whichever tree it runs in (run it from each tree
with the same venv, alternating, and compare).

    python -m benchmarks.next_page_parts [--pages 20000] [--rounds 5] [--earlier 400]

Parts: `cursors` (20 session-position cursors signed, as feed_connection does), `posts`
(20 Post objects over FeedPost rows), `served` (app.feed.service._already_served of a page
at session position --earlier). The I/O of a page (the session GET, the filter query) and
its kernel time are not here: benchmarks/next_page_cpu.py and feed_wrk measure the whole.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

from app.api.schema.types import Post
from app.feed import service
from app.feed.cursor import CursorCodec, SessionPosition, fingerprint
from app.feed.modes import FeedMode
from app.feed.rows import FeedPost, FeedRow


def parts(earlier: int) -> dict[str, Callable[[], object]]:
    codec = CursorCodec("a-secret-key-of-the-usual-length-0123456789")
    fp = fingerprint(12345, FeedMode.RANKED)
    positions = [SessionPosition("k3YbJx0f2cQ1u9W8rT5vZa", earlier + n + 1) for n in range(20)]
    when = datetime(2026, 12, 1, 12, tzinfo=UTC)
    posts = [
        FeedPost(
            1_577_000_000_000_000_000 + n,
            1000 + n % 7,
            when,
            "a post body",
            "public",
            1,
            None,
            3 * n,
            n,
        )
        for n in range(20)
    ]
    ids = list(range(10_000, 10_000 + earlier + 40))
    rows = [
        (FeedRow(ids[earlier + n], 1, 0, 0, 1, "public", when, None, "b"), positions[n])
        for n in range(20)
    ]
    served = service._already_served
    if "end" in inspect.signature(served).parameters:  # this change: no slice

        def served_page() -> object:
            return served(rows, ids, earlier)  # type: ignore[call-arg]
    else:

        def served_page() -> object:
            return served(rows, ids[:earlier])

    return {
        "cursors": lambda: [codec.encode(p, fp) for p in positions],
        "posts": lambda: [Post(row=p) for p in posts],
        "served": served_page,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--earlier", type=int, default=400)
    args = parser.parse_args(argv)
    timings: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, part in parts(args.earlier).items():
            started = time.process_time()
            for _ in range(args.pages):
                part()
            timings.setdefault(name, []).append((time.process_time() - started) / args.pages * 1e6)
    for name, values in timings.items():
        rounds = ", ".join(f"{v:.1f}" for v in values)
        print(f"{name:8} {statistics.median(values):6.1f} µs per page (rounds: {rounds})")


if __name__ == "__main__":
    main()
