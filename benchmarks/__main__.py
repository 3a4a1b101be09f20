"""`python -m benchmarks report [...]`: the issue's spelling of `python -m benchmarks.report`."""

from __future__ import annotations

import sys

USAGE = "usage: python -m benchmarks report [--scale small|medium|large] [--reuse] ...\n"

if __name__ == "__main__":
    if sys.argv[1:2] != ["report"]:
        sys.stderr.write(USAGE)
        sys.exit(2)
    from benchmarks.report.__main__ import main

    sys.exit(main(sys.argv[2:]))
