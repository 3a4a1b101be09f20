"""Subscription root: `feedUpdates` over graphql-transport-ws, and the websocket's context.

Auth happens once per socket, in `connection_init` (`{"Authorization": "Bearer <token>"}`,
the key in any letter case): a missing or bad token rejects the connection (close 4403, the
reason says why) before any operation can start, and the socket closes (4403) when the token
expires. The protocol handler itself is app.api.endpoint.websocket.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field

import strawberry
from starlette.websockets import WebSocket, WebSocketDisconnect
from strawberry.exceptions import ConnectionRejectionError
from strawberry.types import Info

from app.api.fast.live_frames import SendText, SocketFrames, feed_update
from app.api.fast.raw_frames import SCOPE_KEY as RAW_FRAMES_KEY
from app.api.schema.context import Context
from app.api.schema.loaders import Loaders
from app.api.schema.types import FeedUpdate
from app.api.transports.socket_limits import (
    count_subscribe,
    subscription_caps,
    subscription_refusal,
)
from app.auth.tokens import header_claims
from app.errors import AppError, BadInput
from app.realtime.hub import Hub
from app.realtime.leases import CapReached

# Scope key under which app.web puts the connection's transport `abort` (uvicorn): a peer
# that stopped reading never takes a close frame, so a dropped socket is cut instead.
ABORT_KEY = "feed.transport_abort"
CLOSE_TIMEOUT = 1.0  # seconds a close frame may wait for room in the socket's send buffer


async def close_socket(websocket: WebSocket, code: int, reason: str) -> None:
    """Close with a code when the socket still drains, else abort the connection."""
    try:
        await asyncio.wait_for(websocket.close(code=code, reason=reason), CLOSE_TIMEOUT)
    except (TimeoutError, RuntimeError, OSError, WebSocketDisconnect):
        abort = websocket.scope.get(ABORT_KEY)
        if callable(abort):
            abort()


@dataclass
class SocketContext(Context):
    """One per websocket connection; Strawberry fills `connection_params` at connection_init.
    Operations get an `OperationContext` of their own (fresh DataLoaders each)."""

    hub: Hub | None = None
    connection_params: dict[str, object] | None = None
    token_expires_at: float | None = None  # Unix time; the socket closes (4403) then

    def authenticate(self) -> None:
        """Accept the socket for one user, or raise ConnectionRejectionError (close 4403)."""
        if isinstance(self.auth_error, BadInput):  # the edge's region header (request_region)
            error = self.auth_error
            raise ConnectionRejectionError({"code": error.code, "message": error.message})
        header = _authorization(self.connection_params or {})
        if header is None:
            # A non-browser client may authenticate the upgrade request instead.
            header = self.request.headers.get("authorization") if self.request else None
        if not isinstance(header, str) or not header.strip():
            raise ConnectionRejectionError(
                {
                    "code": "UNAUTHENTICATED",
                    "message": 'send {"Authorization": "Bearer <token>"} in connection_init',
                }
            )
        try:
            self.token = header_claims(self.state.settings, header)
            user_id, expires_at = self.token.user_id, self.token.expires_at
        except AppError as exc:
            raise ConnectionRejectionError({"code": exc.code, "message": exc.message}) from exc
        self.viewer_id = user_id
        self.auth_error = None
        self.token_expires_at = expires_at
        self.loaders = Loaders(self.state, user_id)

    def for_operation(
        self,
        operation_id: str,
        send_text: SendText,
        started: Callable[[], None] | None = None,
        hand_off: Callable[[], None] | None = None,
    ) -> OperationContext:
        return OperationContext(
            started=started,
            hand_off=hand_off,
            state=self.state,
            request=self.request,
            viewer_id=self.viewer_id,
            auth_error=self.auth_error,
            hub=self.hub,
            region=self.region,
            operation_id=operation_id,
            send_text=send_text,
        )


def _authorization(params: dict[str, object]) -> object | None:
    """The token from connection_init: `authorization` in any letter case (GraphiQL's Headers
    pane sends `Authorization`), also nested under `headers` as some clients send it."""
    for key, value in params.items():
        if key.lower() == "authorization":
            return value
    headers = params.get("headers")
    if isinstance(headers, dict):
        return _authorization(headers)
    return None


@dataclass
class OperationContext(Context):
    """One operation on a socket: its own DataLoaders, and where its live frames go."""

    hub: Hub | None = None
    operation_id: str = ""
    send_text: SendText | None = None
    # Called once a subscription is set up (its first frame may go out from the hub, not
    # through the operation's stream): the operation's admission slot is given back then.
    started: Callable[[], None] | None = None
    # Called once the hub writes a subscription's frames: the protocol handler ends the
    # operation's task (cancelling it) and keeps the operation; `detach` stops it later.
    hand_off: Callable[[], None] | None = None
    _on_detach: list[Callable[[], None]] = field(default_factory=list)

    def on_detach(self, callback: Callable[[], None]) -> None:
        self._on_detach.append(callback)

    def detach(self) -> None:
        """The operation ended (complete, error, socket closed): stop its live frames now."""
        callbacks, self._on_detach = self._on_detach, []
        for callback in callbacks:
            callback()


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description=(
            "New posts in the viewer's home feed since they last read its first page: the "
            "current count at once, then updates (bursts are merged into one frame)."
        )
    )
    async def feed_updates(self, info: Info[Context, None]) -> AsyncGenerator[FeedUpdate, None]:
        context = info.context
        viewer_id = context.require_viewer()
        if not isinstance(context, OperationContext) or context.hub is None:
            raise BadInput(
                "Subscriptions run over the websocket at /graphql (graphql-transport-ws)."
            )
        hub = context.hub
        websocket = context.request
        assert isinstance(websocket, WebSocket)

        async def close(code: int, reason: str) -> None:
            await close_socket(websocket, code, reason)

        frames: SocketFrames | None = None
        settings = context.state.settings
        if context.send_text is not None and settings.realtime_prepared_frames:
            raw = websocket.scope.get(RAW_FRAMES_KEY)
            frames = SocketFrames.open(info, context.operation_id, context.send_text, raw)
        # Budgets first: a refusal costs one Redis round trip, never a SUBSCRIBE or SQL.
        address = context.client_ip()
        await count_subscribe(context.state.roles.limits, settings, viewer_id, address)
        try:
            hold = await hub.leases.acquire(subscription_caps(settings, viewer_id, address))
        except CapReached as full:
            raise subscription_refusal(full.cap) from None
        context.on_detach(lambda: hub.release_soon(hold))
        try:
            subscriber = await hub.subscribe(viewer_id, close, frames)
        except BaseException:
            hub.release_soon(hold)
            raise
        context.on_detach(lambda: hub.unsubscribe(subscriber))
        if context.started is not None:
            context.started()
        handed_off = False
        try:
            if frames is not None:
                # Frames go out from the hub (app.api.fast.live_frames); this stream only ends.
                if context.hand_off is not None:
                    # The detach callbacks above unsubscribe and release from now on.
                    handed_off = True
                    context.hand_off()
                await asyncio.get_running_loop().create_future()
            while True:
                yield feed_update(await subscriber.next())
        finally:
            if not handed_off:
                hub.unsubscribe(subscriber)
                hub.release_soon(hold)
