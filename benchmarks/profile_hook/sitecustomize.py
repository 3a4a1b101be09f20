"""Profiling hooks for a benchmark's server process (benchmarks/subscribers.py --profile-dir).

Put on the server's PYTHONPATH only when profiling: Python imports `sitecustomize` at start.
Signals from the benchmark mark the phases it wants profiled:

- SIGUSR1: start cProfile (the previous run's stats are discarded);
- SIGUSR2: stop it and write `<dir>/<n>.prof` (n counts the dumps);
- SIGWINCH: with tracemalloc on (PYTHONTRACEMALLOC=<frames>), write `<dir>/<n>.heap`,
  a snapshot of what is allocated now.

Every garbage collection of the oldest generation is appended to `<dir>/gc.log` (start time,
pause in ms, objects collected): a full collection walks every tracked object, and with
thousands of sockets that pause lands in whatever broadcast is running.
"""

from __future__ import annotations

import cProfile
import gc
import itertools
import os
import signal
import time
import tracemalloc
from types import FrameType

_DIR = os.environ.get("BENCH_PROFILE_DIR")
_count = itertools.count(1)
_profile: list[cProfile.Profile] = []


def _start(_signum: int, _frame: FrameType | None) -> None:
    profile = cProfile.Profile()
    _profile[:] = [profile]
    profile.enable()


def _stop(_signum: int, _frame: FrameType | None) -> None:
    if _profile:
        profile = _profile.pop()
        profile.disable()
        profile.dump_stats(os.path.join(_DIR or ".", f"{next(_count)}.prof"))


def _heap(_signum: int, _frame: FrameType | None) -> None:
    n = next(_count)  # numbered even when not tracing: the phases keep their numbers
    if tracemalloc.is_tracing():
        tracemalloc.take_snapshot().dump(os.path.join(_DIR or ".", f"{n}.heap"))


_gc_started = [0.0]


def _gc(phase: str, info: dict[str, int]) -> None:
    if info.get("generation") != 2:
        return
    if phase == "start":
        if os.environ.get("BENCH_GC_TYPES"):  # what a full collection walks (costly)
            import asyncio
            from collections import Counter

            objects = gc.get_objects(2)
            walked = Counter(type(o).__name__ for o in objects)
            tasks = Counter(
                getattr(o.get_coro(), "__qualname__", "?")
                for o in objects
                if isinstance(o, asyncio.Task)
            )
            coros = Counter(o.__qualname__ for o in objects if type(o).__name__ == "coroutine")
            with open(os.path.join(_DIR or ".", "gc.types"), "a") as log:
                log.write(
                    f"{time.time():.3f} {sum(walked.values())} {walked.most_common(8)}"
                    f" tasks {tasks.most_common(5)} coroutines {coros.most_common(5)}\n"
                )
        _gc_started[0] = time.perf_counter()
        return
    pause = 1000 * (time.perf_counter() - _gc_started[0])
    with open(os.path.join(_DIR or ".", "gc.log"), "a") as log:
        log.write(f"{time.time():.3f} {pause:.1f} {info.get('collected', 0)}\n")


if _DIR:
    gc.callbacks.append(_gc)
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    signal.signal(signal.SIGWINCH, _heap)
