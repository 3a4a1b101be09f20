"""Smaller per-socket state in uvicorn's websockets-sansio protocol (decision 0055).

A live socket is held for hours, and at 5,000 of them every object it keeps counts. Three
things uvicorn's protocol and the `websockets` library keep per socket cost ~5.5 KB and are
replaced here, in place, with the same behaviour:

- the protocol's `asyncio.Queue` of received messages (three deques, ~760 B each, and an
  Event with a fourth) and its `writable` Event (a fifth deque): `LeanQueue` and
  `LeanEvent` below do what uvicorn asks of them (put_nowait/get/empty; set/clear/wait/
  is_set) with a list each, empty most of the time;
- `websockets`' `ServerProtocol.parse` generator keeps the handshake's `Request` (~2 KB)
  for as long as the connection lives: `drop_handshake_request`, in the `websockets`
  adapter (app.api.upstream.websockets), replaces it once the socket is open.

Upstream internals used (each checked before use; anything else is left alone, as under
another server or protocol): uvicorn's `WebSocketsSansIOProtocol.queue` and `.writable`
(read through app.api.upstream.uvicorn.uvicorn_protocol, which checks the protocol's type and
attributes) and whether asyncio's Queue and Event have waiters (app.api.upstream.asyncio).
tests/realtime/test_lean_sockets.py fails when one of these changes.
"""

from __future__ import annotations

import asyncio
from typing import Any, Generic, TypeVar

from app.api.upstream.asyncio import has_waiters
from app.api.upstream.websockets import drop_handshake_request

__all__ = ["LeanEvent", "LeanQueue", "drop_handshake_request", "lighten"]

T = TypeVar("T")


def _wake_first(waiters: list[asyncio.Future[None]]) -> None:
    while waiters:
        waiter = waiters.pop(0)
        if not waiter.done():
            waiter.set_result(None)
            return


class LeanQueue(Generic[T]):
    """An unbounded FIFO with asyncio.Queue's put_nowait/get/get_nowait/empty/qsize."""

    __slots__ = ("_items", "_waiters")

    def __init__(self) -> None:
        self._items: list[T] = []
        self._waiters: list[asyncio.Future[None]] = []

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)

    def put_nowait(self, item: T) -> None:
        self._items.append(item)
        _wake_first(self._waiters)

    def get_nowait(self) -> T:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.pop(0)

    async def get(self) -> T:
        """asyncio.Queue.get's logic: FIFO waiters, a cancelled one hands its wake-up on."""
        while not self._items:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                waiter.cancel()
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                if self._items and not waiter.cancelled():
                    _wake_first(self._waiters)
                raise
        return self._items.pop(0)


class LeanEvent:
    """asyncio.Event's set/clear/is_set/wait, with no deque until someone waits."""

    __slots__ = ("_value", "_waiters")

    def __init__(self, value: bool = False) -> None:
        self._value = value
        self._waiters: list[asyncio.Future[None]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        if self._value:
            return
        self._value = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        if self._value:
            return True
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        try:
            await waiter
            return True
        finally:
            if self._waiters is not None and waiter in self._waiters:
                self._waiters.remove(waiter)


def lighten(protocol: Any) -> bool:
    """Swap the protocol's queue and `writable` Event for the lean ones; before the app
    reads a message or sends one (nothing waits on either yet). False: left alone."""
    queue, writable = protocol.queue, protocol.writable
    if type(queue) is not asyncio.Queue or type(writable) is not asyncio.Event:
        return False
    if has_waiters(queue) or has_waiters(writable):
        return False  # someone waits already: not the moment
    lean: LeanQueue[Any] = LeanQueue()
    while not queue.empty():
        lean.put_nowait(queue.get_nowait())
    protocol.queue = lean
    protocol.writable = LeanEvent(writable.is_set())
    return True
