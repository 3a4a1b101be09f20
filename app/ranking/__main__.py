"""`python -m app.ranking <command>`: the ranking's operator commands (docs/operations.md).
explain: a viewer's arm, model version and top candidates with their scores."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app.config import get_settings
from app.ranking import explain


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.ranking", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    explain.add_parser(commands)
    args = parser.parse_args(argv)
    return int(args.run(args, get_settings()))


if __name__ == "__main__":
    sys.exit(main())
