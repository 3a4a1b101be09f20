"""graphql-transport-ws as this API speaks it: Strawberry's protocol handler, plus what a
long-lived socket needs that a request does not.

- Text frames (the protocol's messages are JSON text; standard clients reject binary ones).
- Fresh state per operation: each `subscribe` gets its own context and DataLoaders, so a
  query sent again over the same socket sees deletions, privacy changes and blocks made in
  between, and rows loaded by one operation are freed when it ends.
- Token lifetime: the socket closes with 4403 when the token it was opened with expires, or
  within TOKEN_RECHECK_SECONDS after it was logged out or outdated (app.auth.revocation).
- A message size limit equal to the HTTP body limit (close 1009).
- Close reasons that say what to send (4403 carries the reason the token was refused).
- Limits (app.api.transports.socket_limits, decision 0017): sockets per address and per
  account (4429), operations at once per socket, and each operation takes an admission slot
  (app.api.transports.admission) until its first result, as an HTTP request does.
- Every refusal of an operation is an `error` message with `extensions.code`, syntax errors
  included (Strawberry closed the socket, or logged a traceback and sent a bare `complete`).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import orjson
from graphql import GraphQLError
from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState
from strawberry.asgi import ASGIWebSocketAdapter
from strawberry.exceptions import ConnectionRejectionError
from strawberry.types import ExecutionResult

from app.api.endpoint.subscriptions import OperationContext, SocketContext
from app.api.transports.admission import MESSAGE as OVERLOADED_MESSAGE
from app.api.transports.admission import RETRY_AFTER_SECONDS, SLOTS_SCOPE_KEY, Slots
from app.api.transports.socket_limits import (
    CLOSE_TOO_MANY,
    address_socket_caps,
    operations_refusal,
    socket_refusal,
    user_socket_caps,
)
from app.api.transports.trusted import DocumentRefused
from app.api.upstream.starlette import server_receive, server_send
from app.api.upstream.strawberry import (
    BaseGraphQLTransportWSHandler,
    CompleteMessage,
    ConnectionInitMessage,
    Message,
    NonJsonMessageReceived,
    NonTextMessageReceived,
    Operation,
    OperationStreamClosed,
    PreExecutionError,
    SubscribeMessage,
    UnsetType,
    WebSocketDisconnected,
    aclosing,
)
from app.api.upstream.uvicorn import end_denied_handshake
from app.auth import revocation
from app.errors import BadInput, Overloaded, Unavailable
from app.realtime.leases import Cap, CapReached, Hold

if TYPE_CHECKING:
    from app.api.endpoint.schema import FeedSchema
    from app.api.upstream.strawberry import StreamResult

CLOSE_TOO_BIG = 1009  # RFC 6455: a message too big to process
CLOSE_FORBIDDEN = 4403
CLOSE_TRY_AGAIN = 1013  # RFC 6455 "Try Again Later": graphql-ws retries it
RETRYABLE_CODES = frozenset({Unavailable.code, Overloaded.code})
MAX_REASON_BYTES = 123  # RFC 6455: a close reason fits in a control frame


SUBPROTOCOL_MESSAGE = (
    "This endpoint speaks the graphql-transport-ws subprotocol only: send "
    "`Sec-WebSocket-Protocol: graphql-transport-ws` (the graphql-ws npm client does)."
)


class MessageTooBig(Exception):
    pass


async def refuse_subprotocol(websocket: WebSocket) -> None:
    """A handshake that does not offer graphql-transport-ws (the legacy `graphql-ws`, or
    none) is refused before the socket opens: HTTP 400 with a GraphQL error body where the
    server can send one (uvicorn can), else 403. Nothing is accepted and then closed."""
    error = {"message": SUBPROTOCOL_MESSAGE, "extensions": {"code": BadInput.code}}
    try:
        await websocket.send_denial_response(JSONResponse({"errors": [error]}, status_code=400))
    except RuntimeError:  # no denial-response extension: the server answers 403
        await websocket.close(code=1002)
        return
    # uvicorn logs its access-style INFO line for the 400; without this, an ERROR as well.
    end_denied_handshake(server_send(websocket))


def close_reason(text: str) -> str:
    """Truncated to what a close frame can carry, on a character boundary."""
    raw = text.encode()
    if len(raw) <= MAX_REASON_BYTES:
        return text
    return raw[: MAX_REASON_BYTES - 3].decode(errors="ignore") + "..."


class TextFrameAdapter(ASGIWebSocketAdapter):
    """JSON text frames out (orjson encodes; its UTF-8 is decoded once into the str a text
    frame carries), and incoming messages bounded like HTTP bodies."""

    @property
    def max_bytes(self) -> int:
        return int(getattr(self.view, "max_message_bytes", 64 * 1024))

    async def iter_json(self, *, ignore_parsing_errors: bool = False) -> AsyncGenerator[object]:
        try:
            while self.ws.application_state != WebSocketState.DISCONNECTED:
                try:
                    text = await self.ws.receive_text()
                except KeyError as exc:  # a binary frame
                    raise NonTextMessageReceived from exc
                # Characters are 1-4 bytes: count bytes only when it could matter.
                if len(text) * 4 > self.max_bytes and len(text.encode()) > self.max_bytes:
                    raise MessageTooBig
                try:
                    yield orjson.loads(text)
                except orjson.JSONDecodeError as exc:
                    if not ignore_parsing_errors:
                        raise NonJsonMessageReceived from exc
        except (WebSocketDisconnect, RuntimeError):
            # RuntimeError: receive after the socket closed (Starlette's own state check).
            return

    async def send_json(self, message: Mapping[str, object]) -> None:
        try:
            await self.ws.send_text(orjson.dumps(message).decode())
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            raise WebSocketDisconnected from exc

    async def close(self, code: int, reason: str) -> None:
        """Every close reason fits a close frame: one over 123 bytes (Strawberry's 4409
        quotes the client's id) broke the connection instead (1006, no code)."""
        await self.ws.close(code=code, reason=close_reason(reason))

    async def send_text(self, text: str) -> None:
        """A frame prepared elsewhere (app.api.fast.live_frames); as send_json on failure."""
        try:
            await self.ws.send_text(text)
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            raise WebSocketDisconnected from exc


class FeedTransportWSHandler(BaseGraphQLTransportWSHandler[SocketContext, None]):
    websocket: TextFrameAdapter

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._expiry: int | None = None  # this socket's entry in `expiries`
        self._watched: int | None = None  # this socket's entry in revocation.watch
        self._op_contexts: dict[str, OperationContext] = {}
        self._holds: list[Hold] = []  # this socket's leases (per address, per account)
        # Operations holding an admission slot (a list: empty, or an item or two, for the
        # socket's life; an empty set was ~0.2 KB of every socket).
        self._slot_held: list[str] = []
        # Subscriptions whose frames the hub writes, whose task was ended (`_hand_off`).
        self._handed_off: set[str] = set()
        self.max_operations = self.context.state.settings.realtime_operations_per_socket
        self.max_subscriptions_per_connection = None  # Strawberry's untyped check: ours instead

    @property
    def _slots(self) -> Slots | None:
        slots = self.websocket.ws.scope.get(SLOTS_SCOPE_KEY)
        return slots if isinstance(slots, Slots) else None

    async def _hold(self, caps: list[Cap]) -> bool:
        """Take this socket's place under `caps`; else close it (4429) and say so."""
        hub = self.context.hub
        if hub is None:
            return True
        try:
            self._holds.append(await hub.leases.acquire(caps))
        except CapReached as full:
            with contextlib.suppress(Exception):
                await self.websocket.close(CLOSE_TOO_MANY, close_reason(socket_refusal(full.cap)))
            return False
        return True

    async def handle(self) -> None:
        """Strawberry's `handle`, with its message loop inlined (the adapter's `iter_json`
        and Starlette's `receive_text` and `receive`: same messages, same state checks, same
        refusals): an idle socket waits here for hours, and every coroutine or generator on
        its task's stack is held as long (decision 0055)."""
        ws = self.websocket.ws
        receive = server_receive(ws)  # the server's; Starlette's `receive` checks are made below
        connected = WebSocketState.CONNECTED
        try:
            settings = self.context.state.settings
            if not await self._hold(address_socket_caps(settings, self.context.client_ip())):
                return
            self.on_request_accepted()
            try:
                try:
                    while ws.application_state == connected and ws.client_state == connected:
                        received = await receive()
                        kind = received["type"]
                        if kind != "websocket.receive":
                            if kind == "websocket.disconnect":
                                ws.client_state = WebSocketState.DISCONNECTED
                            break  # any other kind: Starlette's RuntimeError, the loop's end
                        message = _decode(received.get("text"), self.websocket.max_bytes)
                        del received, kind  # not held while the socket waits
                        await self.handle_message(message)
                        del message
                except NonTextMessageReceived:
                    await self.handle_invalid_message("WebSocket message type must be text")
                except NonJsonMessageReceived:
                    await self.handle_invalid_message("WebSocket message must be valid JSON")
            except WebSocketDisconnected:
                pass
            finally:
                await self.shutdown()
        except MessageTooBig:
            limit = self.websocket.max_bytes
            with contextlib.suppress(Exception):
                await self.websocket.close(CLOSE_TOO_BIG, f"Message over {limit} bytes")
        finally:
            if self._expiry is not None:
                expiries.cancel(self._expiry)
            if self._watched is not None:
                revocation.watch.remove(self._watched)
            hub = self.context.hub
            for hold in self._holds:
                if hub is not None:
                    hub.release_soon(hold)

    async def handle_message(self, message: Any) -> None:
        if not isinstance(message, dict):
            await self.handle_invalid_message("A message must be a JSON object with a 'type'")
            return
        if message.get("type") in ("subscribe", "complete") and not isinstance(
            message.get("id"), str
        ):
            # The protocol's ids are strings; any other JSON value (an object is not even
            # hashable) used to crash the handler: the socket dropped without a close code.
            await self.handle_invalid_message(f"A {message['type']} message needs a string 'id'")
            return
        await super().handle_message(cast(Message, message))

    async def handle_invalid_message(self, error_message: str) -> None:
        await self.websocket.close(code=4400, reason=close_reason(error_message))

    async def shutdown(self) -> None:
        for op_context in list(self._op_contexts.values()):
            op_context.detach()
        await super().shutdown()

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        """Strawberry's, with a close reason that says what was wrong and what to send, and
        a timer that ends the socket when its token expires."""
        if self.connection_timed_out:
            return
        if self.connection_init_timeout_task:
            self.connection_init_timeout_task.cancel()
            # Not kept for the socket's life (a finished task keeps its coroutine): the
            # loop holds it until its cancellation lands.
            self.connection_init_timeout_task = None
        payload = message.get("payload", {})
        if payload is None:
            payload = {}
        if not isinstance(payload, dict):
            await self.websocket.close(code=4400, reason="Invalid connection init payload")
            return
        if self.connection_init_received:
            await self.websocket.close(code=4429, reason="Too many initialisation requests")
            return
        self.connection_init_received = True
        self.context.connection_params = payload
        try:
            ack = await self.view.on_ws_connect(self.context)
        except ConnectionRejectionError as exc:
            payload = exc.payload if isinstance(exc.payload, dict) else {}
            detail = payload.get("message")
            if payload.get("code") in RETRYABLE_CODES:
                # The token could not be checked (PostgreSQL away, the process full): not a
                # verdict on it. 1013 is "try again later", which standard clients retry;
                # 4403 would make them give up or drop a good token.
                reason = f"Try again later: {detail}" if detail else "Try again later"
                await self.websocket.close(code=CLOSE_TRY_AGAIN, reason=close_reason(reason))
                return
            reason = f"Forbidden: {detail}" if detail else "Forbidden"
            await self.websocket.close(code=CLOSE_FORBIDDEN, reason=close_reason(reason))
            return
        if self.context.viewer_id is not None and not await self._hold(
            user_socket_caps(self.context.state.settings, self.context.viewer_id)
        ):
            return
        if isinstance(ack, UnsetType):
            await self.send_message({"type": "connection_ack"})
        else:
            await self.send_message({"type": "connection_ack", "payload": ack})
        self.connection_acknowledged = True
        self._arm_expiry()

    def _arm_expiry(self) -> None:
        expires_at = self.context.token_expires_at
        if expires_at is None:
            return
        self._expiry = expiries.add(expires_at, self._on_expiry)
        context = self.context
        if context.token is not None:
            # Re-checked with every other socket's token in one loop (revocation.Watch).
            self._watched = revocation.watch.add(
                context.state.roles.limits,
                context.state.sessions,
                context.token,
                context.state.settings.token_recheck_seconds,
                self._on_revoked,
            )

    def _on_revoked(self) -> None:
        """The token was logged out or outdated by changePassword: close the socket (4403)."""
        self._watched = None
        task = asyncio.ensure_future(self._close_revoked())
        task.add_done_callback(self._task_done)

    async def _close_revoked(self) -> None:
        with contextlib.suppress(Exception):
            await self.websocket.close(
                code=CLOSE_FORBIDDEN, reason="Forbidden: the token was revoked; log in again"
            )

    def _on_expiry(self) -> None:
        self._expiry = None
        task = asyncio.ensure_future(self._close_expired())
        task.add_done_callback(self._task_done)

    async def _close_expired(self) -> None:
        with contextlib.suppress(Exception):
            await self.websocket.close(
                code=CLOSE_FORBIDDEN,
                reason="Forbidden: the token expired; reconnect with a new token",
            )

    async def handle_subscribe(self, message: SubscribeMessage) -> None:
        expires_at = self.context.token_expires_at
        if self.connection_acknowledged and expires_at is not None and time.time() >= expires_at:
            await self._close_expired()
            return
        payload = message.get("payload")
        query: object = payload.get("query") if isinstance(payload, dict) else None
        if not isinstance(payload, dict) or not isinstance(query, str | None):
            await self.handle_invalid_message("A subscribe message needs payload.query")
            return
        wrong = _misshapen(cast(dict[str, Any], payload))
        if wrong is not None:  # graphql-core would fail on it with a traceback
            await self.handle_invalid_message(wrong)
            return
        if self.connection_acknowledged and message["id"] not in self.operations:
            # A trusted document may be named by its hash (transports.trusted): run its text.
            # Learned (APQ) and client documents too: looked up, never learned here.
            documents = cast("FeedSchema", self.schema).documents
            state = self.context.state
            try:
                query = await documents.resolve_async(
                    query,
                    payload.get("documentId"),
                    payload.get("extensions"),
                    state.engine,
                    state.roles.sessions,
                )
            except DocumentRefused as refused:
                error = {"id": message["id"], "type": "error", "payload": [refused.formatted]}
                await self.send_message(cast(Message, error))
                return
            if not query:
                await self.handle_invalid_message(
                    "A subscribe message needs payload.query or .documentId"
                )
                return
            payload["query"] = query
            if len(self.operations) >= self.max_operations:
                too_many = operations_refusal(self.max_operations)
                error_ = GraphQLError(str(too_many), original_error=too_many)
                await self._send_error(message["id"], [error_])
                return
        await super().handle_subscribe(message)

    async def _send_error(self, operation_id: str, errors: list[GraphQLError]) -> None:
        """An `error` message for an operation that never ran: codes as over HTTP."""
        self.schema.process_errors(errors)
        payload = [error.formatted for error in errors]
        await self.send_message(
            cast(Message, {"id": operation_id, "type": "error", "payload": payload})
        )

    async def run_operation(self, operation: Operation[SocketContext, None]) -> None:
        """Strawberry's, with a context (and DataLoaders) of the operation's own."""
        op_context = self.context.for_operation(
            operation.id,
            self.websocket.send_text,
            lambda: self._release_slot(operation.id),
            lambda: self._hand_off(operation.id),
        )
        self._op_contexts[operation.id] = op_context
        try:
            if not await self._admit(operation):
                return
            result_source = await self.schema.stream(
                operation.query,
                variable_values=operation.variables,
                context_value=op_context,
                root_value=self.root_value,
                operation_name=operation.operation_name,
            )
            async with aclosing(result_source):
                await self._send_result_stream(operation, result_source)
            await operation.send_operation_message(
                CompleteMessage(id=operation.id, type="complete")
            )
        except OperationStreamClosed:
            return
        except asyncio.CancelledError:
            if operation.id in self._handed_off:
                return  # the hub sends its frames now; `complete` or the close ends it
            raise
        except WebSocketDisconnected:
            return  # the peer is gone: nothing left to tell it
        except GraphQLError as error:
            # A parse error raised by the parser cache's extension, outside Strawberry's own
            # handling: BAD_USER_INPUT over HTTP, an `error` message here.
            self.schema.process_errors([error])
            with contextlib.suppress(WebSocketDisconnected):
                await operation.send_initial_errors([error])
        except Exception as error:
            await self.handle_task_exception(error)
            with contextlib.suppress(Exception):
                await operation.send_operation_message({"id": operation.id, "type": "complete"})
            self.operations.pop(operation.id, None)
            raise
        finally:
            self._release_slot(operation.id)
            if operation.id not in self._handed_off:
                op_context.detach()
                if self._op_contexts.get(operation.id) is op_context:
                    del self._op_contexts[operation.id]

    def _hand_off(self, operation_id: str) -> None:
        """A subscription whose frames the hub writes (app.api.frames) needs no task: end
        it and keep the operation registered (its id, its limits, its `complete`). Its task
        with the GraphQL stream under it was ~10 KB of every socket, for hours."""
        operation = self.operations.get(operation_id)
        if operation is None or operation.task is None or operation.task.done():
            return
        self._handed_off.add(operation_id)
        task = operation.task
        task.cancel()
        # The ended task (and its coroutine) is not kept for the socket's life either.
        task.add_done_callback(lambda _: _let_go(operation, task))

    async def _admit(self, operation: Operation[SocketContext, None]) -> bool:
        """An admission slot (transports.admission) until the operation's first result: a query or
        mutation over a socket waits and is refused like one over HTTP, and a subscription
        pays its setup (SQL, Redis) inside the same bound. False: refused and told so."""
        slots = self._slots
        if slots is None:
            return True
        refused = await slots.acquire()
        if refused is not None:
            error = GraphQLError(
                OVERLOADED_MESSAGE,
                original_error=Overloaded(OVERLOADED_MESSAGE, retry_after=RETRY_AFTER_SECONDS),
            )
            self.schema.process_errors([error])
            await operation.send_initial_errors([error])
            return False
        self._slot_held.append(operation.id)
        return True

    def _release_slot(self, operation_id: str) -> None:
        if operation_id in self._slot_held:
            self._slot_held.remove(operation_id)
            slots = self._slots
            if slots is not None:
                slots.release()

    async def _send_result_stream(
        self, operation: Operation[SocketContext, None], result_source: StreamResult
    ) -> None:
        """Strawberry's, plus: the admission slot is given back after the first result, and a
        request error (bad variables; a subscription refused by a budget or a cap before its
        first event) gets an `error` message, as the protocol asks, not a `next`."""
        first = True
        async for result in result_source:
            if first and isinstance(result, PreExecutionError):
                self._release_slot(operation.id)
                await self._handle_pre_execution_error(operation, result)
                return
            if not isinstance(result, ExecutionResult):
                self._release_slot(operation.id)
                await self._reject_incremental_delivery(operation)
                return
            if first and _refused_before_running(result):
                self._release_slot(operation.id)
                await operation.send_initial_errors(list(result.errors or ()))
                return
            await operation.send_next(result)
            if first:
                first = False
                self._release_slot(operation.id)

    async def _handle_pre_execution_error(
        self, operation: Operation[SocketContext, None], result: PreExecutionError
    ) -> None:
        """Errors before execution are `error` messages: Strawberry closed the socket (4400)
        for a syntax error or an unknown operation name, which HTTP answers as a request
        error and the protocol as an `error` message."""
        await operation.send_initial_errors(list(result.errors or ()))

    async def cleanup_operation(self, operation_id: str) -> None:
        # Stop live frames now: the task's cancellation only lands on the next loop turn.
        op_context = self._op_contexts.get(operation_id)
        if op_context is not None and operation_id in self.operations:
            op_context.detach()
        if operation_id in self._handed_off and operation_id in self.operations:
            self._handed_off.discard(operation_id)
            self._op_contexts.pop(operation_id, None)
            if self.operations[operation_id].task is None:  # ended and let go (`_hand_off`)
                del self.operations[operation_id]
                return
        await super().cleanup_operation(operation_id)


def _let_go(operation: Operation[SocketContext, None], task: asyncio.Task[Any]) -> None:
    if operation.task is task:
        operation.task = None


class Deadlines:
    """Callbacks at wall-clock times, on one loop timer for all of them: a socket's token
    expiry was a TimerHandle of its own (~0.5 KB with its heap entry, for the socket's life);
    here it is a heap entry and a dict item. Cancelled entries leave the heap when they come
    up, or all at once when they are over half of it."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._due: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._due)

    def add(self, at: float, callback: Callable[[], None]) -> int:
        """Run `callback` at Unix time `at` (at once if past); the key cancels it."""
        key = next(self._ids)
        self._due[key] = callback
        heapq.heappush(self._heap, (at, key))
        self._arm()
        return key

    def cancel(self, key: int) -> None:
        if self._due.pop(key, None) is not None and len(self._heap) > 2 * len(self._due) + 64:
            self._heap = [entry for entry in self._heap if entry[1] in self._due]
            heapq.heapify(self._heap)

    def _arm(self) -> None:
        heap = self._heap
        if not heap:
            return
        at = heap[0][0]
        loop = asyncio.get_running_loop()
        timer = self._timer
        if timer is not None and not timer.cancelled():
            if self._timer_at <= at and self._timer_loop is loop:
                return
            timer.cancel()
        self._timer_at, self._timer_loop = at, loop
        self._timer = loop.call_later(max(0.0, at - time.time()), self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = time.time()
        heap = self._heap
        while heap and (heap[0][0] <= now or heap[0][1] not in self._due):
            _, key = heapq.heappop(heap)
            callback = self._due.pop(key, None)
            if callback is not None:
                callback()
        if heap:
            self._arm()


expiries = Deadlines()  # the token expiries of this process's sockets


def _decode(text: str | None, limit: int) -> object:
    """A received message's JSON (TextFrameAdapter.iter_json's checks, in its order)."""
    if text is None:  # a binary frame
        raise NonTextMessageReceived
    # Characters are 1-4 bytes: count bytes only when it could matter.
    if len(text) * 4 > limit and len(text.encode()) > limit:
        raise MessageTooBig
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise NonJsonMessageReceived from exc


def _misshapen(payload: dict[str, Any]) -> str | None:
    """What is wrong with a subscribe payload's optional fields (PROTOCOL.md: variables and
    extensions objects or null, operationName a string or null), if anything."""
    for name, kind, what in (
        ("variables", dict, "an object"),
        ("extensions", dict, "an object"),
        ("operationName", str, "a string"),
    ):
        value = payload.get(name)
        if value is not None and not isinstance(value, kind):
            return f"payload.{name} must be {what} or null"
    return None


def _refused_before_running(result: ExecutionResult) -> bool:
    """A request error, nothing ran: no data, and no error belongs to a field (no `path`):
    variables that do not coerce, a subscription refused by a budget or a cap before its
    source stream started. Field errors keep their `next` (with `data`), as over HTTP."""
    errors = result.errors or []
    return result.data is None and bool(errors) and all(e.path is None for e in errors)
