"""Regions as the visibility rule sees them: the name check, and the region whose policy
judges the current request (decision 0088).

A viewer is judged by the region that serves them: the process's REGION, or the region a
trusted edge names in REGION_HEADER (app.api.schema.context decides the trust and sets it
here once per request or socket). Carried in a context variable rather than as an argument
through every query's callers: the request's task and every task it starts (DataLoaders,
the feed's stages) see it, so no read path can forget to pass it; code outside a request
(workers, operator commands) is judged by the process's serving region.

Names are checked against REGION_PATTERN before they reach SQL, where the rule writes them
as literals (one statement per region: the feed's statements stay prepared per region).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextvars import ContextVar, Token

from app.errors import BadInput

# The form of a region name, as app.config's REGION setting checks it.
REGION_PATTERN = r"^[a-z][a-z0-9-]{0,31}$"
_REGION = re.compile(REGION_PATTERN)
# A post is restricted in at most this many regions (one argument of the command, one row each).
MAX_REGIONS = 64

_serving = "local"
_viewer_region: ContextVar[str | None] = ContextVar("viewer_region", default=None)


def check_region(name: str, known: Iterable[str] = ()) -> str:
    """`name` if it is a well-formed region name (and one of `known`, when that is not
    empty), else BadInput naming the problem."""
    if not _REGION.fullmatch(name):
        raise BadInput(
            f"{name!r} is not a region name: lower-case letters, digits and '-', starting"
            " with a letter, at most 32 characters."
        )
    allowed = set(known)
    if allowed and name not in allowed:
        raise BadInput(f"Unknown region {name!r}: POLICY_REGIONS lists {sorted(allowed)}.")
    return name


def set_serving_region(region: str) -> None:
    """The process's REGION (app.state at start-up): who no request judges otherwise."""
    global _serving
    _serving = check_region(region)


def serving_region() -> str:
    return _serving


def judge_in(region: str) -> Token[str | None]:
    """Judge the current request (its task and the tasks it starts) by `region`'s policy."""
    return _viewer_region.set(check_region(region))


def current_region() -> str:
    """The region whose policy judges what the current request reads."""
    return _viewer_region.get() or _serving


def region_literal(region: str) -> str:
    """`region` as an SQL literal, checked first (the name's form admits no quote)."""
    return f"'{check_region(region)}'"
