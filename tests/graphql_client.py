"""Send the project's own operation documents over HTTP, as a client would."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from app.api.documents import operations


@dataclass
class Result:
    status: int
    data: dict[str, Any] | None
    errors: list[dict[str, Any]]

    @property
    def codes(self) -> list[str]:
        return [e.get("extensions", {}).get("code", "") for e in self.errors]

    def ok(self) -> dict[str, Any]:
        assert self.status == 200, self.status
        assert not self.errors, self.errors
        assert self.data is not None
        return self.data


async def gql(
    client: httpx.AsyncClient,
    operation: str,
    variables: dict[str, Any] | None = None,
    token: str | None = None,
    query: str | None = None,
) -> Result:
    """Run a named operation from graphql/operations (or a raw query when given)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    payload: dict[str, Any] = {
        "query": query or operations()[operation],
        "variables": variables or {},
    }
    if query is None:
        payload["operationName"] = operation
    response = await client.post("/graphql", json=payload, headers=headers)
    body = response.json()
    return Result(response.status_code, body.get("data"), body.get("errors") or [])


async def sign_up(client: httpx.AsyncClient, handle: str, password: str = "password123") -> str:
    data = (await gql(client, "SignUp", {"handle": handle, "password": password})).ok()
    return str(data["signUp"]["token"])
