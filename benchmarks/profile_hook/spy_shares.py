"""Shares from py-spy's raw (collapsed) profiles, as docs/benchmarks/archive.md quotes them.

    python -m benchmarks.profile_hook.spy_shares FILE... [--top 30] [--match TEXT]

FILE: `py-spy record -f raw` output (benchmarks/feed_wrk.py --profile writes one per API
worker; pass all of a run's files). Prints each function's share of all samples with its
callees (inclusive: the samples whose stack holds it) and on its own (self: the leaf),
largest first; `--match` keeps the functions whose name or file contains TEXT.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^():]*)(?::\d+)?\)$")


def _short(frame: str) -> str:
    match = _FRAME.match(frame)
    if match is None:
        return frame
    file = match["file"]
    for marker in ("site-packages/", "/work/"):
        if marker in file:
            file = file.split(marker, 1)[1]
    return f"{match['name']} ({file})"


def shares(paths: list[Path]) -> tuple[int, Counter[str], Counter[str]]:
    """(samples, inclusive counts, self counts) over every file."""
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n = int(count)
            frames = [_short(f) for f in stack.split(";")]
            total += n
            for frame in set(frames):
                inclusive[frame] += n
            own[frames[-1]] += n
    return total, inclusive, own


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--match", default="")
    args = parser.parse_args(argv)
    total, inclusive, own = shares(args.files)
    print(f"{total} samples")
    for title, counts in (("inclusive", inclusive), ("self", own)):
        print(f"\n## {title}")
        rows = [(n, f) for f, n in counts.items() if args.match in f]
        for n, frame in sorted(rows, reverse=True)[: args.top]:
            print(f"{100 * n / total:6.1f}%  {frame}")


if __name__ == "__main__":
    main()
