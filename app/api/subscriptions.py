"""Subscription root: `feedUpdates` over graphql-transport-ws, and the websocket's context.

Auth happens once per socket, in `connection_init` (`{"authorization": "Bearer <token>"}`):
a missing or bad token rejects the connection (close 4403) before any operation can start.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import strawberry
from starlette.websockets import WebSocket, WebSocketDisconnect
from strawberry.exceptions import ConnectionRejectionError
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types import Info

from app.api.context import Context
from app.api.loaders import Loaders
from app.api.types import FeedUpdate
from app.auth.tokens import user_id_from_header
from app.errors import AppError, BadInput
from app.realtime.counts import FeedCount
from app.realtime.hub import Hub

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
    """One per websocket connection; Strawberry fills `connection_params` at connection_init."""

    hub: Hub | None = None
    connection_params: dict[str, object] | None = None

    def authenticate(self) -> None:
        """Accept the socket for one user, or raise ConnectionRejectionError (close 4403)."""
        header = (self.connection_params or {}).get("authorization")
        if header is None and self.viewer_id is not None and self.auth_error is None:
            return  # a non-browser client authenticated the upgrade request's header
        if not isinstance(header, str) or not header.strip():
            raise ConnectionRejectionError(
                {
                    "code": "UNAUTHENTICATED",
                    "message": 'Send {"authorization": "Bearer <token>"} in connection_init.',
                }
            )
        try:
            user_id = user_id_from_header(self.state.settings, header)
        except AppError as exc:
            raise ConnectionRejectionError({"code": exc.code, "message": exc.message}) from exc
        if user_id is None:  # pragma: no cover - a non-empty header always yields an id
            raise ConnectionRejectionError({"code": "UNAUTHENTICATED"})
        self.viewer_id = user_id
        self.auth_error = None
        self.loaders = Loaders(self.state, user_id)


class EventScopedExecutor(StrawberryGraphQLCoreExecutionContext):
    """graphql-core 3.3.2 shares its subfield memo between a subscription's executor and the
    per-event copies, keyed by the id of a list built anew for every event: each frame
    leaves ~17 objects behind for the life of the socket. Per-event copies get their own."""

    def build_per_event_executor(self, payload: Any) -> Any:
        executor = super().build_per_event_executor(payload)
        executor._relevant_sub_fields = {}
        return executor


def _feed_update(state: FeedCount) -> FeedUpdate:
    at = datetime.fromtimestamp(state.latest_ms / 1000, UTC) if state.latest_ms else None
    return FeedUpdate(new_post_count=state.count, latest_post_at=at)


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
        hub = getattr(context, "hub", None)
        websocket = context.request
        if hub is None or not isinstance(websocket, WebSocket):
            raise BadInput("Subscribe over the websocket at /graphql (graphql-transport-ws).")

        async def close(code: int, reason: str) -> None:
            await close_socket(websocket, code, reason)

        subscriber = await hub.subscribe(viewer_id, close)
        try:
            while True:
                yield _feed_update(await subscriber.next())
        finally:
            hub.unsubscribe(subscriber)
