"""Two asyncio helpers the read path's stages share: reads run at once without a second
task, and background tasks whose failure is read by their owner."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
U = TypeVar("U")


async def concurrently(
    first: Coroutine[object, object, T], second: Coroutine[object, object, U]
) -> tuple[T, U]:
    """Both at once, with one extra task (asyncio.gather makes two)."""
    task = asyncio.ensure_future(second)
    try:
        result = await first
    except BaseException:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise
    return result, await task


def retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a background task's failure as seen (its owner reads it, or has failed itself)."""
    if not task.cancelled():
        task.exception()
