"""/metrics: who may scrape it, and the scrape (the readiness gauge refreshed first)."""

from __future__ import annotations

import hmac
from typing import cast

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from app.config import Settings
from app.health import Probes, export_readiness
from app.observability.exposition import render as render_metrics


def metrics_refusal(settings: Settings, authorization: str | None) -> Response | None:
    """Why /metrics is not served to this caller, or None. With METRICS_TOKEN set it wants
    `Authorization: Bearer <token>` (401 otherwise); without one it is open in development
    and off (404) in the production profile: each scrape runs SQL and Redis, and the figures
    tell an attacker how the service is doing."""
    token = settings.metrics_token
    if not token:
        if settings.profile == "production":
            return PlainTextResponse("Not Found", status_code=404)
        return None
    sent = (authorization or "").encode()
    if hmac.compare_digest(sent, f"Bearer {token}".encode()):
        return None
    return PlainTextResponse(
        "Send Authorization: Bearer <METRICS_TOKEN>.",
        status_code=401,
        headers={"www-authenticate": "Bearer"},
    )


class MetricsEndpoint:
    """GET /metrics: refused as `metrics_refusal` says, else every registry's figures."""

    def __init__(self, settings: Settings, probes: Probes) -> None:
        self.settings = settings
        self.probes = probes

    async def serve(self, request: Request) -> Response:
        refused = metrics_refusal(self.settings, request.headers.get("authorization"))
        if refused is not None:
            return refused
        answer, _ = await self.probes.recent_ready.get()  # feed_ready as fresh as /readyz's
        export_readiness(cast(dict[str, str], answer["checks"]))
        body = await render_metrics(self.probes.current_state())
        return Response(body, media_type=CONTENT_TYPE_LATEST)
