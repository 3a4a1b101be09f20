"""`asyncio.wait_for` as Python 3.12 has it, installed on 3.11 (decision 0093).

Python 3.11's `wait_for` returns the inner result and drops a cancellation that arrives in
the loop turn between the inner future finishing and the waiting task waking up (CPython
gh-86296, fixed in 3.12 by building `wait_for` on `asyncio.timeout`). redis-py 8 wraps every
command's send in `wait_for(..., socket_timeout)`, so a task busy with Redis (an ARQ worker's
poll loop, a subscription, a request) could lose the cancel meant to stop it: a worker sent
SIGTERM went on polling for ever. 3.12's version cancels at once and re-raises.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

_stdlib_wait_for = asyncio.wait_for


async def wait_for(fut: Awaitable[T], timeout: float | None) -> T:  # noqa: ASYNC109 - its signature
    """CPython 3.12's `asyncio.wait_for`: a cancellation is never swallowed."""
    if timeout is not None and timeout <= 0:
        task = asyncio.ensure_future(fut)
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.wait({task})
        try:
            return task.result()
        except asyncio.CancelledError as exc:
            raise TimeoutError from exc
    async with asyncio.timeout(timeout):
        return await fut


def install() -> None:
    """Replace `asyncio.wait_for` (and `asyncio.tasks.wait_for`) below Python 3.12: libraries
    look it up on the module at call time, so every caller gets the fixed one."""
    if sys.version_info >= (3, 12):
        return
    patched: Any = wait_for
    asyncio.wait_for = patched
    asyncio.tasks.wait_for = patched
