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

On a cluster (decision 0089) the store sends one call per node, each over the page's
timelines that node serves, so a tail rides there only if it can be cut by node: its
`split` (`NodeSplit`) gives the tail of each node's call (`part`), names a key whose node
must run after every other (`last_key`, e.g. the one online set the counts check), and
merges the parts' answers into the `reply` the whole tail would have given (`merge`). In a
node's call `push.away[i]` marks the timelines the node no longer serves (a slot moved): not
written there, so a tail must leave their keys alone; the store writes them elsewhere and
hands their positions to `merge`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.redis_scripts import LuaScript
from app.timelines.scripts import NODE_PRELUDE, PUSH_ARGS, PUSH_FRAGMENT


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
    split: NodeSplit | None = None  # how to cut it by cluster node (None: standalone only)


class NodeSplit(Protocol):
    """A tail cut into one part per cluster node's call (decision 0089)."""

    @property
    def last_key(self) -> Any:
        """A key whose node's call must run after every other node's (None: any order); that
        node gets a call even when it serves none of the page's timelines."""

    def part(self, positions: Sequence[int], last: bool) -> Tail:
        """The tail of one node's call: `positions` are the page's users (0-based) whose
        timelines the call writes, in its order; `last`: the call of `last_key`'s node."""

    def merge(self, parts: Sequence[tuple[Sequence[int], Tail]], redo: Sequence[int]) -> Any:
        """The whole tail's answer from each call's (positions, answered part); `redo`: the
        page's users (0-based) whose timelines no call wrote (moved slots: the store wrote
        them afterwards, without the tail)."""


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


# One cluster node's call (decision 0089): as `_MAIN`, and the positions of the timelines the
# node no longer serves (`MOVED_AWAY`, app.timelines.scripts) both as `push.away` for the
# tails and last in the answer.
_NODE_MAIN = f"""
local TAILS = {{%s}}
local n = tonumber(ARGV[{PUSH_ARGS + 1}])
local gained = push_keys(n)
local away = {{}}
for _, i in ipairs(MOVED_AWAY) do away[i] = true end
local push = {{n = n, gained = gained, away = away}}
local out = {{gained}}
for i = 1, #TAILS do
  local at = {PUSH_ARGS + 1} + 2 * i
  out[i + 1] = TAILS[i](push, tonumber(ARGV[at - 1]), tonumber(ARGV[at]))
end
out[#TAILS + 2] = MOVED_AWAY
return out
"""


@functools.cache
def fused_node_script(programs: tuple[TailProgram, ...]) -> LuaScript:
    """`fused_script` for one cluster node's call (keys in ARGV, `NODE_PRELUDE`)."""
    preludes = "".join(p.prelude for p in programs)
    bodies = ", ".join(f"function(push, k, a)\n{p.lua}\nend" for p in programs)
    name = "+".join(("push", *(p.name for p in programs))) + "@node"
    return LuaScript(name, NODE_PRELUDE + PUSH_FRAGMENT + preludes + _NODE_MAIN % bodies)
