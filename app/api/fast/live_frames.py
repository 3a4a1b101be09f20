"""Prepared `feedUpdates` frames: one GraphQL execution per distinct update, not per socket.

Why: a post that reaches 5,000 sockets used to pay Strawberry's whole per-event path 5,000
times (a graphql-core executor, result processing, a dict, orjson, an asyncio task wake-up
per socket): ~280 us of server CPU a frame. The subscription is still started by Strawberry
(parse, validation, limits, the resolver) and its first frame is the same as any other; only
the per-frame work changes:

- `FramePlan`: per validated operation (the parser cache hands every socket that sends the
  same text the same document node) and variables, the `payload` JSON for an update is
  computed once by graphql-core's own per-event executor and kept for the next sockets
  with the same update. `FeedUpdate`'s fields are pure functions of the update (no viewer,
  no I/O): that is what makes sharing sound. A viewer-dependent field there would have to
  join the cache key.
- `SocketFrames`: the operation's `{"id":..,"type":"next","payload":` prefix built once;
  the frame is written straight to the transport where that is safe (app.api.fast.raw_frames),
  else the ASGI send is driven inline, so a socket with room in its buffer costs no task.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from graphql import DocumentNode, GraphQLError, OperationDefinitionNode
from strawberry.types import Info

from app.api.fast.raw_frames import RawFrames
from app.api.schema.types import FeedUpdate
from app.api.upstream.graphql import execute_subscription_event
from app.api.upstream.strawberry import raw_info, variable_values
from app.realtime.counts import FeedCount
from app.realtime.metrics import prepared_written

MAX_PLANS = 256  # distinct (document, variables) pairs kept per process
MAX_PAYLOADS = 512  # distinct updates kept per plan (an update is (count, latest post time))

SendText = Callable[[str], Coroutine[Any, Any, None]]


def feed_update(state: FeedCount) -> FeedUpdate:
    at = datetime.fromtimestamp(state.latest_ms / 1000, UTC) if state.latest_ms else None
    return FeedUpdate(new_post_count=state.count, latest_post_at=at)


class FramePlan:
    """The payloads of one subscription document (and variables) for any update."""

    def __init__(self, info: Info[Any, Any], operation: OperationDefinitionNode) -> None:
        self.operation = operation  # held: the cache key is its id
        raw = raw_info(info)
        schema = raw.schema
        document = DocumentNode(definitions=(operation, *raw.fragments.values()))
        executor_class = info.schema.execution_context_class
        assert executor_class is not None
        executor = executor_class.build(
            schema,
            document,
            context_value=None,  # shared by sockets: FeedUpdate's fields need no context
            # The coerced values of an already valid operation: coercing them again is the
            # identity for the Boolean/Int/String variables a feedUpdates document can use.
            raw_variable_values=variable_values(info),
            operation_name=operation.name.value if operation.name else None,
        )
        if isinstance(executor, list):  # variables that do not round-trip: no shared plan
            raise PlanUnavailable(str(executor))
        self._executor = executor
        self._process_errors = info.schema.process_errors
        self._payloads: dict[tuple[int, int | None], bytes] = {}

    def payload(self, state: FeedCount) -> bytes:
        key = (state.count, state.latest_ms)
        text = self._payloads.get(key)
        if text is None:
            text, cacheable = self._execute(state)
            if cacheable:
                if len(self._payloads) >= MAX_PAYLOADS:
                    self._payloads.clear()
                self._payloads[key] = text
        return text

    def _execute(self, state: FeedCount) -> tuple[bytes, bool]:
        """graphql-core's ExecuteSubscriptionEvent, formatted as Strawberry's `next`."""
        event = self._executor.build_per_event_executor(feed_update(state))
        result = execute_subscription_event(event)
        if isinstance(result, Awaitable):  # pragma: no cover - FeedUpdate resolves in place
            raise TypeError("feedUpdates fields must resolve synchronously")
        payload: dict[str, Any] = {"data": result.data}
        if result.errors:
            errors: list[GraphQLError] = list(result.errors)
            self._process_errors(errors)
            payload["errors"] = [error.formatted for error in errors]
        return orjson.dumps(payload), not result.errors


class PlanUnavailable(Exception):
    pass


_plans: OrderedDict[tuple[int, bytes], FramePlan] = OrderedDict()


def plan_for(info: Info[Any, Any]) -> FramePlan:
    """The shared plan of this operation, built on first use."""
    operation = info.operation
    variables = orjson.dumps(variable_values(info), option=orjson.OPT_SORT_KEYS, default=str)
    key = (id(operation), variables)
    plan = _plans.get(key)
    if plan is None or plan.operation is not operation:
        plan = FramePlan(info, operation)
        _plans[key] = plan
        if len(_plans) > MAX_PLANS:
            _plans.popitem(last=False)
    else:
        _plans.move_to_end(key)
    return plan


@dataclass(slots=True)
class SocketFrames:
    """Where one operation's live frames go: the hub calls `send` for every update."""

    plan: FramePlan
    prefix: bytes
    write: SendText
    raw: RawFrames | None = None
    broken: bool = False

    @classmethod
    def open(
        cls, info: Info[Any, Any], operation_id: str, write: SendText, raw: RawFrames | None
    ) -> SocketFrames | None:
        """None when this operation cannot share a plan: Strawberry then sends its frames."""
        try:
            plan = plan_for(info)
        except PlanUnavailable:
            return None
        prefix = b'{"id":' + orjson.dumps(operation_id) + b',"type":"next","payload":'
        return cls(plan, prefix, write, raw)

    def send(self, state: FeedCount) -> asyncio.Future[None] | None:
        """None when the frame went out at once; else the future of the send still waiting
        for room in the socket's buffer. A socket that failed once is not written again
        (its reader notices the close and ends the operation)."""
        if self.broken:
            return None
        data = self.prefix + self.plan.payload(state) + b"}"
        try:
            if self.raw is not None and self.raw.write(data):
                prepared_written("raw")  # counted once per loop turn
                return None
            prepared_written("asgi")
            return run_inline(self.write(data.decode()))
        except Exception:
            self.broken = True
            return None


def run_inline(coro: Coroutine[Any, Any, None]) -> asyncio.Future[None] | None:
    """Run a coroutine as far as it goes without waiting; a task finishes the rest if it
    has to wait (a full socket buffer). An ASGI send to a socket with room never waits, so
    the common case costs a few function calls instead of a task and a loop turn."""
    try:
        waiting_on = coro.send(None)
    except StopIteration:
        return None
    return asyncio.ensure_future(_resume(coro, waiting_on))


async def _resume(coro: Coroutine[Any, Any, None], waiting_on: Any) -> None:
    await _Resumed(coro, waiting_on)


class _Resumed:
    """Continues a coroutine that was started by hand and suspended on `waiting_on` (an
    asyncio future, as awaiting a future yields it): the task running this waits on it as
    if the coroutine itself had been the task's."""

    __slots__ = ("coro", "waiting_on")

    def __init__(self, coro: Coroutine[Any, Any, None], waiting_on: Any) -> None:
        self.coro = coro
        self.waiting_on = waiting_on

    def __await__(self) -> Generator[Any, None, None]:
        waiting_on = self.waiting_on
        while True:
            try:
                yield waiting_on
            except BaseException as exc:  # cancellation: hand it to the coroutine
                try:
                    waiting_on = self.coro.throw(exc)
                except StopIteration:
                    return
                continue
            try:
                waiting_on = self.coro.send(None)
            except StopIteration:
                return
