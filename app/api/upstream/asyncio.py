"""asyncio internals: whether an `asyncio.Queue` or `asyncio.Event` has waiters.

app.api.transports.lean_sockets swaps uvicorn's per-socket Queue and Event for smaller ones
only while nothing waits on them; asyncio keeps its waiters in private deques (`_getters`,
`_waiters`). An asyncio without them reads as "no waiters" only if the attribute is gone, so
tests/api/upstream/test_upstream_fence.py checks both still exist."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["EVENT_WAITERS", "QUEUE_GETTERS", "has_waiters"]

QUEUE_GETTERS = "_getters"  # asyncio.Queue's deque of futures blocked in get()
EVENT_WAITERS = "_waiters"  # asyncio.Event's deque of futures blocked in wait()


def has_waiters(primitive: asyncio.Queue[Any] | asyncio.Event) -> bool:
    """Someone waits on this Queue's get() or this Event's wait()."""
    name = QUEUE_GETTERS if isinstance(primitive, asyncio.Queue) else EVENT_WAITERS
    return bool(getattr(primitive, name, None))
