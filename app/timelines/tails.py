"""Tails: other packages' work riding in the fan-out's timeline write (decision 0070).

Why: a fan-out batch page is one EVALSHA on a standalone server (decision 0049): the insert
into ~1,000 timelines, then the live counts of its online recipients (`app.realtime`), then,
on a job's last page, the job's tracking step (`jobs.tracking`), atomic and in one round
trip. The store owns that call; the others attach a `Tail` each and never see another's
layout: the store composes the program and gives every tail its own offsets, so a tail that
changes its keys or arguments moves nobody else's.

A tail's Lua (`TailProgram.lua`) is the body of a function `(push, k, a)`:
- its keys are KEYS[k + 1], KEYS[k + 2], ... and its arguments ARGV[a + 1], ARGV[a + 2], ...
  (exactly `Tail.keys` and `Tail.args`, in order);
- `push.n` is the number of timelines written (KEYS[1..push.n], `timeline_key` each) and
  `push.gained` how many gained the post;
- it returns its answer (never nil: `false` for none), which lands in `Tail.reply`.
`TailProgram.prelude` holds top-level definitions the body uses (helpers, compiled once per
script); preludes of one call must not define the same local names.
Tails run in the order given, after the insert; an error anywhere fails the whole call
(nothing after it runs, and the caller's retry repeats it, idempotently).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.redis_scripts import LuaScript
from app.timelines.scripts import PUSH_ARGS, PUSH_FRAGMENT


@dataclass(frozen=True)
class TailProgram:
    """The Lua of one kind of tail (see the module's docstring for the contract)."""

    name: str  # names the composed script (`fused_script`)
    lua: str  # body of `function(push, k, a)`: reads its KEYS after k, its ARGV after a
    prelude: str = ""  # top-level Lua the body uses


@dataclass
class Tail:
    """One tail of one call: its program, its keys and arguments (laid out as its program
    reads them, from 1), and its answer once the call ran (None: it did not run, and the
    caller does the work itself)."""

    program: TailProgram
    keys: Sequence[Any]
    args: Sequence[Any]
    reply: Any = None


# ARGV after the push's own PUSH_ARGS: the number of timelines, then per tail its key and
# argument offsets, then the tails' arguments.
_MAIN = f"""
local TAILS = {{%s}}
local n = tonumber(ARGV[{PUSH_ARGS + 1}])
local push = {{n = n, gained = push_keys(n)}}
local out = {{push.gained}}
for i = 1, #TAILS do
  local at = {PUSH_ARGS + 1} + 2 * i
  out[i + 1] = TAILS[i](push, tonumber(ARGV[at - 1]), tonumber(ARGV[at]))
end
return out
"""


@functools.cache
def fused_script(programs: tuple[TailProgram, ...]) -> LuaScript:
    """The push of one post into n timelines followed by these tails, as one script (built
    once per combination)."""
    preludes = "".join(p.prelude for p in programs)
    bodies = ", ".join(f"function(push, k, a)\n{p.lua}\nend" for p in programs)
    name = "+".join(("push", *(p.name for p in programs)))
    return LuaScript(name, PUSH_FRAGMENT + preludes + _MAIN % bodies)


def fused_call(
    timeline_keys: Sequence[Any], push_args: Sequence[Any], tails: Sequence[Tail]
) -> tuple[LuaScript, list[Any], list[Any]]:
    """The script, keys and arguments of one fused call: the timelines, then each tail's
    keys; the push's arguments, n, each tail's offsets, then each tail's arguments."""
    keys: list[Any] = list(timeline_keys)
    offsets: list[int] = []
    tail_args: list[Any] = []
    k, a = len(keys), PUSH_ARGS + 1 + 2 * len(tails)
    for tail in tails:
        offsets += [k, a]
        keys += tail.keys
        tail_args += tail.args
        k, a = k + len(tail.keys), a + len(tail.args)
    args = [*push_args, len(timeline_keys), *offsets, *tail_args]
    return fused_script(tuple(t.program for t in tails)), keys, args
