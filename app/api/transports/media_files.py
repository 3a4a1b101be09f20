"""The local object store over HTTP (MEDIA_STORE=local; app.media.local_store decides, this
module speaks HTTP): `PUT /media/<key>` takes a presigned upload's bytes, `GET /media/<key>`
serves an object. Every answer to a GET carries the signed Content-Type (one of four image
types, never HTML or SVG), `X-Content-Type-Options: nosniff`, `Content-Security-Policy:
default-src 'none'` and a Cache-Control no longer than the URL lives. Refusals are plain
text with no detail a prober could use beyond the status. With another store: 404."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Route

from app.media.local_store import LocalStore, Refused
from app.state import AppState

SAFE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'",
}


def _refusal(refused: Refused) -> Response:
    return PlainTextResponse(
        refused.reason,
        status_code=refused.status,
        headers=SAFE_HEADERS | {"Cache-Control": "no-store"},
    )


def media_route(current_state: Callable[[], AppState]) -> Route:
    """The route app.web adds: GET and PUT on `/media/{key}`."""

    async def serve(request: Request) -> Response:
        store = current_state().media_store
        if not isinstance(store, LocalStore):
            return PlainTextResponse("Not Found", status_code=404)
        key = request.path_params["key"]
        params = dict(request.query_params)
        try:
            if request.method == "PUT":
                grant = store.check_put(key, params, request.headers)
                await store.receive(grant, request.stream())
                return Response(status_code=200, headers=SAFE_HEADERS)
            found = store.check_get(key, params)
        except Refused as refused:
            return _refusal(refused)
        except ClientDisconnect:  # gone mid-body: the partial file is already removed
            return _refusal(Refused(400, "body not received"))
        scope = "public" if found.public else "private"
        return FileResponse(
            found.path,
            media_type=found.content_type,
            headers=SAFE_HEADERS | {"Cache-Control": f"{scope}, max-age={found.max_age_seconds}"},
        )

    return Route("/media/{key}", serve, methods=["GET", "PUT"])
