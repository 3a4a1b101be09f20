"""Clients' own documents (app.client_documents, decision 0083): the three manifest formats
registered with `python -m app.documents` (run as a process, as an operator would), then
served by the client's own ids over HTTP on the compiled path with the `__typename`s the
client's build added; a manifest with one invalid document refused whole; `list` and
`remove`; TRUSTED_DOCUMENTS_ONLY accepting them."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.api.transports.trusted import CLIENT_MANIFEST_PATH
from app.config import PROJECT_ROOT, get_settings
from app.state import AppState
from tests.api.transports.documents_http import api_process, send, text_plans_answered
from tests.helpers import codes, create_post, eventually, sign_up

NOT_FOUND = "PERSISTED_QUERY_NOT_FOUND"

# As Apollo Client sends it: `__typename` added to every selection set but the root.
APOLLO_FEED = """query ClientFeed($first: Int) {
  feed(first: $first) {
    edges {
      node {
        id
        body
        author {
          handle
          __typename
        }
        __typename
      }
      __typename
    }
    pageInfo {
      hasNextPage
      __typename
    }
    __typename
  }
}"""
VIEWER = "query ClientViewer { viewer { __typename handle } }"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # Relay's default id


def documents_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m app.documents ...` on the test database (the environment's DATABASE_URL)."""
    return subprocess.run(
        [sys.executable, "-m", "app.documents", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def register(tmp_path: Path, manifest: object, *extra: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    return documents_cli("register", str(path), *extra)


def apollo_manifest(*bodies: tuple[str, str]) -> dict[str, Any]:
    """@apollo/generate-persisted-query-manifest's output for (name, body) pairs."""
    return {
        "format": "apollo-persisted-query-manifest",
        "version": 1,
        "operations": [
            {"id": sha256(body), "name": name, "type": "query", "body": body}
            for name, body in bodies
        ],
    }


def check_feed(answer: dict[str, Any], body: str) -> None:
    feed = answer["data"]["feed"]
    assert feed["__typename"] == "FeedConnection"
    assert feed["pageInfo"] == {"hasNextPage": False, "__typename": "PageInfo"}
    (edge,) = feed["edges"]
    assert edge["__typename"] == "PostEdge"
    assert edge["node"]["__typename"] == "Post"
    assert edge["node"]["body"] == body
    assert edge["node"]["author"] == {"handle": "alice", "__typename": "User"}


async def test_an_apollo_manifest_is_served_by_its_hashes_on_the_compiled_path(
    state: AppState, tmp_path: Path
) -> None:
    done = register(
        tmp_path, apollo_manifest(("ClientFeed", APOLLO_FEED), ("ClientViewer", VIEWER))
    )
    assert done.returncode == 0, done.stderr
    assert "registered 2 documents (apollo)" in done.stdout
    async with api_process(state) as client:
        token = await sign_up(client, "alice")
        await create_post(client, token, "typed")
        persisted = {"persistedQuery": {"version": 1, "sha256Hash": sha256(APOLLO_FEED)}}
        body = {"extensions": persisted, "variables": {"first": 5}, "operationName": "ClientFeed"}
        first = await send(client, body, token)  # this process reads the table, then plans
        check_feed(first, "typed")
        before = text_plans_answered()
        again = await send(client, body, token)
        assert again == first
        assert text_plans_answered() == before + 1  # answered by the compiled plan
        viewer = {"persistedQuery": {"version": 1, "sha256Hash": sha256(VIEWER)}}
        answer = await send(client, {"extensions": viewer}, token)
        assert answer == {"data": {"viewer": {"__typename": "User", "handle": "alice"}}}
        listed = (await client.get(CLIENT_MANIFEST_PATH)).json()
        assert listed == {sha256(APOLLO_FEED): "ClientFeed", sha256(VIEWER): "ClientViewer"}


async def test_a_codegen_manifest_is_served_by_document_id(state: AppState, tmp_path: Path) -> None:
    """GraphQL Code Generator's client preset: {"<sha256>": "<text>"}, sent as documentId."""
    done = register(tmp_path, {sha256(APOLLO_FEED): APOLLO_FEED})
    assert done.returncode == 0, done.stderr
    assert "(codegen)" in done.stdout
    async with api_process(state) as client:
        token = await sign_up(client, "alice")
        await create_post(client, token, "generated")
        for document_id in (sha256(APOLLO_FEED), "sha256:" + sha256(APOLLO_FEED)):
            answer = await send(
                client, {"documentId": document_id, "variables": {"first": 5}}, token
            )
            check_feed(answer, "generated")


async def test_a_relay_manifest_is_served_by_doc_id(state: AppState, tmp_path: Path) -> None:
    """Relay's persist output: {"<md5>": "<text>"}, sent as `doc_id` (or Relay's older `id`)."""
    relay_feed = APOLLO_FEED.replace("__typename\n", "").replace("ClientFeed", "RelayFeed")
    done = register(tmp_path, {md5(relay_feed): relay_feed, md5(VIEWER): VIEWER})
    assert done.returncode == 0, done.stderr
    assert "(relay)" in done.stdout
    async with api_process(state) as client:
        token = await sign_up(client, "alice")
        await create_post(client, token, "relayed")
        for key in ("doc_id", "id"):
            answer = await send(client, {key: md5(relay_feed), "variables": {"first": 5}}, token)
            edge = answer["data"]["feed"]["edges"][0]
            assert edge["node"]["body"] == "relayed" and "__typename" not in edge, answer
        answer = await send(client, {"doc_id": md5(VIEWER)}, token)
        assert answer == {"data": {"viewer": {"__typename": "User", "handle": "alice"}}}
        unknown = await send(client, {"doc_id": md5("query Nope { viewer { id } }")}, token)
        assert codes(unknown) == [NOT_FOUND]
        # A text sent with a registered id must be that id's text.
        mismatched = await send(client, {"doc_id": md5(VIEWER), "query": relay_feed}, token)
        assert codes(mismatched) == ["BAD_USER_INPUT"]


async def test_a_manifest_with_an_invalid_document_is_refused_whole(tmp_path: Path) -> None:
    bad = "query Broken { viewer { noSuchField } }"
    costly = (
        "query Costly { viewer { followers(first: 100) { edges { node "
        "{ followers(first: 100) { edges { node { id } } } } } } } }"
    )
    manifest = apollo_manifest(("ClientViewer", VIEWER), ("Broken", bad), ("Costly", costly))
    done = register(tmp_path, manifest)
    assert done.returncode == 1
    assert "refused, nothing registered: 2 of 3" in done.stderr
    assert f"{sha256(bad)}: Cannot query field 'noSuchField'" in done.stderr
    assert f"{sha256(costly)}: This query costs" in done.stderr
    assert sha256(VIEWER) not in done.stderr
    listed = documents_cli("list")
    assert listed.returncode == 0 and listed.stdout == ""
    not_a_manifest = register(tmp_path, ["query A { viewer { id } }"])
    assert not_a_manifest.returncode == 1 and "not a manifest" in not_a_manifest.stderr


async def test_list_and_remove(
    state: AppState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(get_settings(), "client_documents_refresh_seconds", 0.05)
    assert register(tmp_path, apollo_manifest(("ClientViewer", VIEWER))).returncode == 0
    assert register(tmp_path, {md5(APOLLO_FEED): APOLLO_FEED}).returncode == 0
    listed = documents_cli("list").stdout.splitlines()
    assert sorted(listed) == sorted(
        [f"{sha256(VIEWER)}\tapollo\tClientViewer", f"{md5(APOLLO_FEED)}\trelay\t-"]
    )
    async with api_process(state) as client:
        token = await sign_up(client, "alice")
        served = await send(client, {"documentId": sha256(VIEWER)}, token)
        assert served["data"]["viewer"]["handle"] == "alice"
        removed = documents_cli("remove", sha256(VIEWER))
        assert removed.stdout.strip() == "removed 1 documents"

        async def gone() -> bool:
            answer = await send(client, {"documentId": sha256(VIEWER)}, token)
            return codes(answer) == [NOT_FOUND]

        # Noticed within CLIENT_DOCUMENTS_REFRESH_SECONDS (0.05 s here) of serving it.
        await eventually(gone, 5, 0.05, "the removed document refused")
    assert documents_cli("list").stdout.splitlines() == [f"{md5(APOLLO_FEED)}\trelay\t-"]
    assert documents_cli("remove", "--all").stdout.strip() == "removed 1 documents"


async def test_trusted_documents_only_accepts_registered_client_documents(
    state: AppState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert register(tmp_path, {sha256(VIEWER): VIEWER}).returncode == 0
    monkeypatch.setattr(get_settings(), "trusted_documents_only", True)
    async with api_process(state) as client:
        token = await sign_up(client, "alice")
        for body in ({"documentId": sha256(VIEWER)}, {"query": VIEWER}):
            answer = await send(client, body, token)
            assert answer == {"data": {"viewer": {"__typename": "User", "handle": "alice"}}}, body
        other = "query Other { viewer { __typename handle } }"
        refused = await send(client, {"query": other}, token)
        assert codes(refused) == ["BAD_USER_INPUT"]
