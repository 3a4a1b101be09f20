"""Shares from a `benchmarks.subscribers --profile-dir` run, as docs/benchmarks/archive.md quotes them.

    python -m benchmarks.profile_hook.shares DIR/prepared-5000 [--sockets 5000] [--top 25]

- `2.prof` (connect) and `4.prof` (celebrity rounds): each function's share of the profiled
  time, own time (tottime) and with callees (cumtime), largest first;
- `1.heap` -> `3.heap` (PYTHONTRACEMALLOC=<frames> set for the server): the memory the
  sockets hold, grouped by the allocating line (and by file), in bytes per socket.
"""

from __future__ import annotations

import argparse
import os
import pstats
import sys
import tracemalloc


def profile_shares(path: str, top: int, key: str) -> None:
    stats = pstats.Stats(path)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (file, line, name), (_cc, calls, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((tt if key == "tottime" else ct, calls, f"{_short(file)}:{line}({name})"))
    rows.sort(reverse=True)
    print(f"\n## {os.path.basename(path)} by {key}: {total:.2f} s profiled")
    for value, calls, where in rows[:top]:
        print(f"{100 * value / total:6.1f}%  {calls:>9}  {where}")


def heap_shares(before: str, after: str, sockets: int, top: int) -> None:
    old = tracemalloc.Snapshot.load(before)
    new = tracemalloc.Snapshot.load(after)
    for group in ("filename", "lineno"):
        diff = new.compare_to(old, group)
        total = sum(d.size_diff for d in diff)
        print(f"\n## heap by {group}: {total / sockets:.0f} B per socket")
        for d in diff[:top]:
            frame = d.traceback[0]
            where = _short(frame.filename) + (f":{frame.lineno}" if group == "lineno" else "")
            print(f"{d.size_diff / sockets:8.0f} B  {d.count_diff / sockets:6.1f} obj  {where}")


def _short(path: str) -> str:
    for marker in ("site-packages/", "/lib/python3", "/work/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--sockets", type=int, default=5000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    for name in ("2.prof", "4.prof"):
        path = os.path.join(args.dir, name)
        if os.path.exists(path):
            profile_shares(path, args.top, "tottime")
            profile_shares(path, args.top, "cumtime")
    before, after = os.path.join(args.dir, "1.heap"), os.path.join(args.dir, "3.heap")
    if os.path.exists(before) and os.path.exists(after):
        heap_shares(before, after, args.sockets, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
