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
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any, cast

import orjson
from starlette.websockets import WebSocketDisconnect, WebSocketState
from strawberry.asgi import ASGIWebSocketAdapter
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http.exceptions import (
    NonJsonMessageReceived,
    NonTextMessageReceived,
    WebSocketDisconnected,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
    _OperationStreamClosed,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    CompleteMessage,
    ConnectionInitMessage,
    Message,
    SubscribeMessage,
)
from strawberry.types.unset import UnsetType
from strawberry.utils.aio import aclosing

from app.api.subscriptions import OperationContext, SocketContext
from app.api.trusted import DocumentRefused
from app.auth import revocation

if TYPE_CHECKING:
    from app.api.schema import FeedSchema

CLOSE_TOO_BIG = 1009  # RFC 6455: a message too big to process
CLOSE_FORBIDDEN = 4403
MAX_REASON_BYTES = 123  # RFC 6455: a close reason fits in a control frame


class MessageTooBig(Exception):
    pass


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

    async def send_text(self, text: str) -> None:
        """A frame prepared elsewhere (app.api.frames); same failure contract as send_json."""
        try:
            await self.ws.send_text(text)
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            raise WebSocketDisconnected from exc


class FeedTransportWSHandler(BaseGraphQLTransportWSHandler[SocketContext, None]):
    websocket: TextFrameAdapter

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._expiry: asyncio.TimerHandle | None = None
        self._recheck: asyncio.Task[None] | None = None
        self._op_contexts: dict[str, OperationContext] = {}

    async def handle(self) -> None:
        try:
            await super().handle()
        except MessageTooBig:
            limit = self.websocket.max_bytes
            with contextlib.suppress(Exception):
                await self.websocket.close(CLOSE_TOO_BIG, f"Message over {limit} bytes")
        finally:
            if self._expiry is not None:
                self._expiry.cancel()
            if self._recheck is not None:
                self._recheck.cancel()

    async def handle_message(self, message: Any) -> None:
        if not isinstance(message, dict):
            await self.handle_invalid_message("A message must be a JSON object with a 'type'")
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
            detail = exc.payload.get("message") if isinstance(exc.payload, dict) else None
            reason = f"Forbidden: {detail}" if detail else "Forbidden"
            await self.websocket.close(code=CLOSE_FORBIDDEN, reason=close_reason(reason))
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
        delay = max(0.0, expires_at - time.time())
        self._expiry = asyncio.get_running_loop().call_later(delay, self._on_expiry)
        if self.context.token is not None:
            self._recheck = asyncio.create_task(self._recheck_token())

    async def _recheck_token(self) -> None:
        """Close the socket (4403) once its token is revoked: logOut or changePassword."""
        context, token = self.context, self.context.token
        assert token is not None
        interval = context.state.settings.token_recheck_seconds
        while True:
            await asyncio.sleep(interval)
            try:
                await revocation.check(context.state.redis, context.state.sessions, token)
            except revocation.Revoked:
                with contextlib.suppress(Exception):
                    await self.websocket.close(
                        code=CLOSE_FORBIDDEN,
                        reason="Forbidden: the token was revoked; log in again",
                    )
                return
            except Exception:  # Redis and Postgres both down: keep the socket, try again later
                continue

    def _on_expiry(self) -> None:
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
        if self.connection_acknowledged and message["id"] not in self.operations:
            # A trusted document may be named by its hash (app.api.trusted): run its text.
            documents = cast("FeedSchema", self.schema).documents
            try:
                query = documents.resolve(
                    query, payload.get("documentId"), payload.get("extensions")
                )
            except DocumentRefused as refused:
                error = {"id": message["id"], "type": "error", "payload": [refused.formatted]}
                await self.send_message(cast(Message, error))
                return
            if query is None:
                await self.handle_invalid_message(
                    "A subscribe message needs payload.query or .documentId"
                )
                return
            payload["query"] = query
        await super().handle_subscribe(message)

    async def run_operation(self, operation: Operation[SocketContext, None]) -> None:
        """Strawberry's, with a context (and DataLoaders) of the operation's own."""
        op_context = self.context.for_operation(operation.id, self.websocket.send_text)
        self._op_contexts[operation.id] = op_context
        try:
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
        except _OperationStreamClosed:
            return
        except WebSocketDisconnected:
            return  # the peer is gone: nothing left to tell it
        except Exception as error:
            await self.handle_task_exception(error)
            with contextlib.suppress(Exception):
                await operation.send_operation_message({"id": operation.id, "type": "complete"})
            self.operations.pop(operation.id, None)
            raise
        finally:
            op_context.detach()
            if self._op_contexts.get(operation.id) is op_context:
                del self._op_contexts[operation.id]

    async def cleanup_operation(self, operation_id: str) -> None:
        # Stop live frames now: the task's cancellation only lands on the next loop turn.
        op_context = self._op_contexts.get(operation_id)
        if op_context is not None and operation_id in self.operations:
            op_context.detach()
        await super().cleanup_operation(operation_id)
