"""Every Lua script names the keys it touches in KEYS (issue 23): a key built inside a script
(from ARGV or a string) is not routed by a Redis Cluster, which refuses it (or, worse, a
standalone server accepts it and the bug waits for the first cluster). The check reads each
`redis.call`/`redis.pcall` of every script the service registers (app/, jobs/) and requires its
key argument to come from KEYS: `KEYS[i]`, `unpack(KEYS)`, or a local bound from them."""

from __future__ import annotations

import importlib
import pkgutil
import re

import app
import jobs
from app.redis_scripts import LuaScript
from app.timelines.tails import TailProgram, fused_script

# Commands whose first argument is not a key (a channel, nothing at all).
KEYLESS = {"PUBLISH", "SPUBLISH", "TIME", "PING", "ECHO"}
# Commands whose every argument is a key.
ALL_KEYS = {"DEL", "UNLINK", "EXISTS", "MGET", "TOUCH"}

_CALL = re.compile(r"redis\.p?call\(\s*'([A-Za-z]+)'\s*(?:,|\))")
_ASSIGN = re.compile(r"^\s*(?:local\s+)?(\w+(?:\s*,\s*\w+)*)\s*=\s*(.+)$", re.M)
_LOOP = re.compile(r"for\s+\w+\s*,\s*(\w+)\s+in\s+ipairs\(KEYS\)")


def registered_scripts() -> list[LuaScript]:
    """Every LuaScript held by a module of app/ or jobs/ (imported here), and the fan-out's
    write with each tail program they hold and with all of them (`app.timelines.tails`)."""
    found: dict[str, LuaScript] = {}
    tails: dict[str, TailProgram] = {}
    for package in (app, jobs):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if isinstance(value, LuaScript):
                    found[value.sha] = value
                elif isinstance(value, TailProgram):
                    tails[value.name] = value
    for combination in [*((t,) for t in tails.values()), tuple(tails.values())]:
        script = fused_script(combination)
        found[script.sha] = script
    return list(found.values())


def _arguments(source: str, start: int) -> list[str]:
    """The call's arguments after the command name, split at depth-0 commas."""
    args, depth, current = [], 0, []
    for char in source[start:]:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        if char == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    last = "".join(current).strip()
    return [*args, last] if last else args


def _bound_to_keys(source: str) -> set[str]:
    """Names assigned from KEYS (`local key, max = KEYS[1], ARGV[1]` binds `key` only) or
    looping over them."""
    bound = set(_LOOP.findall(source))
    for names, values in _ASSIGN.findall(source):
        exprs = _arguments(values + ")", 0)
        for name, expr in zip((n.strip() for n in names.split(",")), exprs, strict=False):
            if expr.startswith("KEYS["):
                bound.add(name)
    return bound


def _from_keys(expr: str, bound: set[str]) -> bool:
    return bool(
        re.fullmatch(r"KEYS\[[^\]]+\]", expr)
        or expr == "unpack(KEYS)"
        or (re.fullmatch(r"\w+", expr) and expr in bound)
    )


def undeclared_keys(script: LuaScript) -> list[str]:
    """`command(argument)` for each key argument not taken from KEYS."""
    source = script.source
    bound = _bound_to_keys(source)
    problems = []
    for call in _CALL.finditer(source):
        command = call.group(1).upper()
        if command in KEYLESS or source[call.end() - 1] == ")":
            continue
        args = _arguments(source, call.end())
        keys = args if command in ALL_KEYS else args[:1]
        problems += [f"{command}({key})" for key in keys if not _from_keys(key, bound)]
    return problems


def test_every_script_takes_its_keys_from_keys() -> None:
    scripts = registered_scripts()
    assert len(scripts) >= 15, "the scan found too few scripts: did registration move?"
    problems = {s.name: p for s in scripts if (p := undeclared_keys(s))}
    assert problems == {}


def test_a_key_built_inside_a_script_is_reported() -> None:
    bad = LuaScript(
        "bad",
        """
local k = KEYS[1]
redis.call('SET', k, ARGV[1])
for _, key in ipairs(KEYS) do redis.call('EXPIRE', key, 60) end
redis.call('INCR', 'counter:' .. ARGV[2])
redis.call('DEL', KEYS[1], ARGV[3])
redis.call('PUBLISH', 'channel', ARGV[1])
""",
    )
    assert undeclared_keys(bad) == ["INCR('counter:' .. ARGV[2])", "DEL(ARGV[3])"]
