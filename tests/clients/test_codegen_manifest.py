"""docs/API.md "Persisted queries": GraphQL Code Generator's client preset with
`persistedDocuments` (apollo/persisted.ts, with Apollo Client's `__typename`s added by
`addTypenameSelectionDocumentTransform`) writes persisted-documents.json for the demo's
documents; `python -m app.documents register` takes that file as it is, and the Feed
document is then served by its id alone (`documentId`, no text) on the compiled path."""

from __future__ import annotations

import fcntl
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import httpx

from app.api.fast.compiled_http import COMPILED
from app.api.fast.text_plans import TEXT_LABEL
from app.client_documents import parse_manifest
from app.state import AppState
from tests.clients.test_codegen import APOLLO_DIR, BIN, STEP_SECONDS
from tests.helpers import app_client, cli, codes, create_post, follow, make_user
from tests.servers import npm_ci

CONFIG = APOLLO_DIR / "persisted.ts"
MANIFEST = APOLLO_DIR / "gql-persisted" / "persisted-documents.json"
ID_PREFIX = "sha256:"  # the preset's ids: "sha256:<hex>" (GraphQL over HTTP, persisted documents)


def generate_manifest(copy_to: Path) -> dict[str, str]:
    """Run codegen with apollo/persisted.ts; its persisted-documents.json, copied to `copy_to`
    (another session may regenerate the file in place once the lock is released)."""
    npm_ci(APOLLO_DIR)
    with CONFIG.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # gql-persisted/ is generated in place
        result = subprocess.run(
            [str(BIN / "graphql-codegen"), "--config", CONFIG.name, "--silent"],
            cwd=APOLLO_DIR,
            capture_output=True,
            text=True,
            timeout=STEP_SECONDS,
        )
        assert result.returncode == 0, f"codegen failed:\n{result.stdout}\n{result.stderr}"
        text = MANIFEST.read_text()
    copy_to.write_text(text)
    return dict(json.loads(text))


def compiled_answers() -> float:
    return float(COMPILED.labels(TEXT_LABEL)._value.get())


async def send_id(client: httpx.AsyncClient, document_id: str, token: str) -> dict[str, Any]:
    body = {"documentId": document_id, "variables": {"first": 10, "mode": "CHRONOLOGICAL"}}
    response = await client.post(
        "/graphql", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_the_client_presets_persisted_documents_are_served_by_id_on_the_compiled_path(
    state: AppState, pipeline: Any, tmp_path: Path
) -> None:
    path = tmp_path / "persisted-documents.json"
    manifest = generate_manifest(path)
    (feed_id,) = [key for key, text in manifest.items() if " query Feed(" in f" {text}"]
    feed = manifest[feed_id]
    for key, text in manifest.items():  # what the server checks to call a map "codegen"
        assert key == ID_PREFIX + hashlib.sha256(text.encode()).hexdigest(), key
    assert "node { __typename ...PostFields }" in feed, "Apollo's __typenames were not added"
    # Read as it is: ids without the prefix, recognized as codegen's without --format.
    assert {(doc.id, doc.format) for doc in parse_manifest(manifest)} == {
        (key.removeprefix(ID_PREFIX), "codegen") for key in manifest
    }

    async with app_client(state) as client:
        viewer, _ = await make_user(client, "viewer")
        author, _ = await make_user(client, "alice")
        await follow(client, viewer, "alice")
        await pipeline.settle()
        for body in ("first", "second"):
            await create_post(client, author, body)
        await pipeline.settle()
        unknown = await send_id(client, feed_id, viewer)  # the server's own Feed has no __typename
        assert codes(unknown) == ["PERSISTED_QUERY_NOT_FOUND"], unknown

    out = await cli("app.documents", "register", str(path), "--format", "codegen")
    assert f"registered {len(manifest)} documents (codegen)" in out, out

    async with app_client(state) as client:
        first = await send_id(client, feed_id, viewer)  # this app reads the table, then plans
        before = compiled_answers()
        again = await send_id(client, feed_id, viewer)
        assert compiled_answers() == before + 1, "not answered by the compiled plan"
        bare = await send_id(client, feed_id.removeprefix(ID_PREFIX), viewer)
    removed = await cli("app.documents", "remove", feed_id)  # as the manifest names it
    assert "removed 1 documents" in removed, removed
    # The compiled answer is the regular path's (`first`), keys in the same order.
    assert json.dumps(again) == json.dumps(first) == json.dumps(bare)
    assert "errors" not in first, first
    page = first["data"]["feed"]
    assert first["data"]["__typename"] == "Query"
    assert page["__typename"] == "FeedConnection"
    assert page["pageInfo"]["__typename"] == "PageInfo"
    assert [edge["node"]["body"] for edge in page["edges"]] == ["second", "first"]
    for edge in page["edges"]:
        assert edge["__typename"] == "PostEdge"
        node = edge["node"]
        assert node["__typename"] == "Post"
        assert node["author"]["__typename"] == "User"
        assert node["author"]["handle"] == "alice"
