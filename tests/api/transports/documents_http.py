"""What the tests of documents sent by id share (trusted, learned, clients' manifests): an
app over the test state as another API process would be, the APQ extension, one POST."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from app.api.fast.compiled_http import COMPILED
from app.api.fast.text_plans import TEXT_LABEL
from app.operation_documents import sha256_hex
from app.state import AppState
from app.web import create_app


@asynccontextmanager
async def api_process(state: AppState) -> AsyncIterator[httpx.AsyncClient]:
    """A fresh app over `state`: its own schema, registry and in-process caches, the
    database and Redis shared, as another API process's."""
    transport = httpx.ASGITransport(app=create_app(state))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


def apq(text: str) -> dict[str, Any]:
    """Apollo's automatic-persisted-query extension for `text`."""
    return {"persistedQuery": {"version": 1, "sha256Hash": sha256_hex(text)}}


async def send(
    client: httpx.AsyncClient, body: dict[str, Any], token: str | None = None
) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = await client.post("/graphql", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def text_plans_answered() -> float:
    """Requests the compiled path answered from a text's plan (`TextPlans`), so far."""
    return float(COMPILED.labels(TEXT_LABEL)._value.get())
