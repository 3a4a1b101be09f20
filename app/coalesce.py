"""Calls that arrive together run together: one round trip for a burst instead of one each.

Why: a reconnect storm opens hundreds of sockets a second, and each one used to pay its own
Redis pipelines (token check, leases) and SQL query; redis-py and SQLAlchemy cost more Python
per call than the commands themselves (docs/benchmarks/archive.md, issue 24: ~3.6 ms of server CPU
per socket). A caller alone pays no wait: its batch starts on the next loop turn. Whoever
arrives while a batch runs goes into the next one (the hub's subscriber admission works the
same way, app.realtime.hub).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")

# A batch's answer per item, in order: a value, or the exception that item's caller gets.
BatchRun = Callable[[list[In]], Awaitable[Sequence[Out | BaseException]]]


class Coalesced(Generic[In, Out]):
    """`await coalesced(item)`: the item joins the next batch; its own answer comes back.

    `orphaned` gets the answers whose caller stopped waiting (cancelled): what a batch took
    for them (a lease) can be given back."""

    def __init__(
        self,
        run: BatchRun[In, Out],
        max_batch: int = 500,
        orphaned: Callable[[Out], None] | None = None,
    ) -> None:
        self._run = run
        self._max = max_batch
        self._orphaned = orphaned
        self._queue: list[tuple[In, asyncio.Future[Out]]] = []
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, item: In) -> Out:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Out] = loop.create_future()
        task = self._task
        if task is not None and not task.done() and task.get_loop() is not loop:
            # A batch left behind by a closed event loop (tests run one per test): drop it.
            self._queue = [(i, f) for i, f in self._queue if f.get_loop() is loop]
            task = None
        self._queue.append((item, future))
        if task is None or task.done():
            self._task = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._queue:
            batch = self._queue[: self._max]
            del self._queue[: self._max]
            batch = [(item, future) for item, future in batch if not future.done()]
            if not batch:
                continue
            try:
                answers = await self._run([item for item, _ in batch])
            except BaseException as exc:  # the whole batch failed: every caller hears why
                for _, future in batch:
                    if not future.done():
                        if isinstance(exc, Exception):
                            future.set_exception(exc)
                        else:  # cancelled (shutdown): so are the callers
                            future.cancel()
                if not isinstance(exc, Exception):
                    raise
                continue
            for (_, future), answer in zip(batch, answers, strict=True):
                if future.done():
                    if self._orphaned is not None and not isinstance(answer, BaseException):
                        self._orphaned(answer)
                elif isinstance(answer, BaseException):
                    future.set_exception(answer)
                else:
                    future.set_result(answer)
