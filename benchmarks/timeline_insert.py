"""Redis's own cost of one fan-out insert into a full packed timeline, by case (issue 24).

An in-process micro-benchmark of `app.timelines.scripts.PUSH_MANY` on a Redis of its own (a
private `redis-server`: the figure is that server's main-thread CPU, `INFO cpu`, around the
timed calls only, divided by the inserts). Calls of `--batch` keys, as a fan-out page sends.

Cases (each round, over every key):
- `append`: the post is newer than the timeline's newest entry (the usual insert);
- `late1`: a newer post reached the timeline first (pushed untimed), then this one: it goes
  one slot before the newest entry;
- `late3`: three newer posts first: three slots back;
- `burst<K>` (`--burst K`, a checkout with PUSH_POSTS): K posts newer than every entry, in one
  PUSH_POSTS call per batch (a job carrying several posts, decision 0059), per insert;
  `burst<K>late`: the same K posts behind one newer post (each inserted one by one).

    REDIS_URL=redis://127.0.0.1:6416/0 python -m benchmarks.timeline_insert --keys 10000 --rounds 5

Run it with PYTHONPATH at another checkout (a `git archive` of main) to measure that
checkout's script with the same command; alternate the two for a before/after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import time

import redis

from app.redis_scripts import LuaScript
from app.timelines.packed import default_trim_slack
from app.timelines.scripts import FORMAT_BYTE, PUSH_MANY

try:
    from app.timelines.scripts import PUSH_POSTS
except ImportError:  # an older checkout (before decision 0059): no burst case
    PUSH_POSTS = None

MAX_ENTRIES = 800


def _cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


def _pack(i: int) -> bytes:
    return struct.pack(">q", i)


class Bench:
    def __init__(self, r: redis.Redis, keys: int, batch: int) -> None:
        self.r = r
        self.keys = [f"bench:tl:{{{n}}}".encode() for n in range(keys)]
        self.batch = batch
        self.next_id = 10_000_000
        self.sha = r.script_load(PUSH_MANY.source)
        slack = default_trim_slack(MAX_ENTRIES)
        self.args = [MAX_ENTRIES, 0, slack, str(-8 * min(8, MAX_ENTRIES))]

    def fill(self) -> None:
        body = FORMAT_BYTE + b"".join(_pack(1_000 + 10 * i) for i in range(MAX_ENTRIES))
        pipe = self.r.pipeline(transaction=False)
        for key in self.keys:
            pipe.delete(key)
            pipe.setrange(key, 0, body)
        pipe.execute()

    def push(self, post: int) -> int:
        pipe = self.r.pipeline(transaction=False)
        for i in range(0, len(self.keys), self.batch):
            part = self.keys[i : i + self.batch]
            pipe.evalsha(self.sha, len(part), *part, _pack(post), *self.args)
        return sum(int(x) for x in pipe.execute())

    def burst(self, k: int, late: bool = False) -> float:
        """Redis CPU µs per insert of k posts in one call per batch: newer than every entry,
        or (`late`) all one slot behind a newer post pushed first (untimed), so each post
        takes the one-by-one path."""
        assert PUSH_POSTS is not None
        sha = self.r.script_load(PUSH_POSTS.source)
        base = self.next_id
        self.next_id += k + 2
        if late:
            self.push(base + k + 1)
        ids = b"".join(_pack(base + 1 + j) for j in range(k))
        pipe = self.r.pipeline(transaction=False)
        for i in range(0, len(self.keys), self.batch):
            part = self.keys[i : i + self.batch]
            pipe.evalsha(sha, len(part), *part, ids, *self.args)
        before = _cpu(self.r)
        added = sum(int(x) for x in pipe.execute())
        spent = _cpu(self.r) - before
        assert added == k * len(self.keys), added
        return spent / (k * len(self.keys)) * 1e6

    def case(self, newer_first: int) -> float:
        """Redis CPU µs per insert of one post after `newer_first` newer posts."""
        base = self.next_id
        self.next_id += newer_first + 2
        for k in range(newer_first):
            self.push(base + 1 + k + 1)
        before = _cpu(self.r)
        added = self.push(base + 1)
        spent = _cpu(self.r) - before
        assert added == len(self.keys), added
        return spent / len(self.keys) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--label", default="")
    parser.add_argument("--burst", type=int, default=0, help="also K posts per call")
    ns = parser.parse_args()
    r = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://127.0.0.1:6416/0"))
    bench = Bench(r, ns.keys, ns.batch)
    bench.fill()
    cases = {"append": 0, "late1": 1, "late3": 3}
    figures: dict[str, list[float]] = {name: [] for name in cases}
    t0 = time.perf_counter()
    bursts = ns.burst > 0 and PUSH_POSTS is not None
    if bursts:
        figures[f"burst{ns.burst}"] = []
        figures[f"burst{ns.burst}late"] = []
    for _ in range(ns.rounds):
        for name, newer in cases.items():
            figures[name].append(bench.case(newer))
        if bursts:
            figures[f"burst{ns.burst}"].append(bench.burst(ns.burst))
            figures[f"burst{ns.burst}late"].append(bench.burst(ns.burst, late=True))
    line = "  ".join(
        f"{name} {min(v):.2f}/{statistics.median(v):.2f}" for name, v in figures.items()
    )
    load = os.getloadavg()[0]
    script: LuaScript = PUSH_MANY
    print(
        f"{ns.label or script.sha[:8]}: Redis CPU µs/insert (best/median of {ns.rounds}) "
        f"{line}  [load {load:.1f}, {time.perf_counter() - t0:.1f} s]"
    )
    r.delete(*bench.keys)


if __name__ == "__main__":
    main()
