"""Automatic persisted queries, learned (app.api.transports.persisted, decision 0082): the
protocol as Apollo's PersistedQueryLink speaks it over HTTP, the store shared by two app
instances on one Redis (two API processes), its bounds per client and in all, and
TRUSTED_DOCUMENTS_ONLY still refusing what is not registered."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from app.api.transports.persisted import INDEX_KEY, TEXTS_KEY
from app.config import get_settings
from app.operation_documents import sha256_hex
from app.state import AppState
from tests.api.transports.documents_http import api_process, apq, send, text_plans_answered
from tests.helpers import codes, create_post, sign_up
from tests.realtime.live import LiveClient
from tests.servers import ApiServer

NOT_FOUND = "PERSISTED_QUERY_NOT_FOUND"


async def apollo_call(
    client: httpx.AsyncClient, text: str, token: str | None = None, **extra: Any
) -> tuple[int, dict[str, Any]]:
    """What PersistedQueryLink does: the hash alone, then (on PERSISTED_QUERY_NOT_FOUND) the
    hash and the text. (requests sent, the answer)."""
    answer = await send(client, {"extensions": apq(text), **extra}, token)
    if codes(answer) != [NOT_FOUND]:
        return 1, answer
    return 2, await send(client, {"query": text, "extensions": apq(text), **extra}, token)


async def test_the_first_call_takes_two_requests_every_later_one_one(state: AppState) -> None:
    viewer = "query ApqViewer { viewer { handle } }"
    async with api_process(state) as first, api_process(state) as second:
        token = await sign_up(first, "alice")
        sent, answer = await apollo_call(first, viewer, token)
        assert sent == 2 and answer == {"data": {"viewer": {"handle": "alice"}}}
        for _ in range(3):  # the same process, then another: one request each
            for process in (first, second):
                sent, answer = await apollo_call(process, viewer, token)
                assert (sent, answer) == (1, {"data": {"viewer": {"handle": "alice"}}})
    # Kept in Redis (the sessions role) with its TTL, indexed for the cap.
    redis = state.roles.sessions
    assert await redis.hget(TEXTS_KEY, sha256_hex(viewer)) == viewer.encode()
    for key in (TEXTS_KEY, INDEX_KEY):
        assert 0 < await redis.ttl(key) <= get_settings().apq_ttl_seconds
    assert await redis.zscore(INDEX_KEY, sha256_hex(viewer)) is not None


async def test_a_learned_feed_document_takes_the_compiled_path(state: AppState) -> None:
    feed = (
        "query ApqFeed { feed(first: 2) "
        "{ __typename edges { __typename node { __typename id body } } } }"
    )
    async with api_process(state) as first, api_process(state) as second:
        token = await sign_up(first, "alice")
        await create_post(first, token, "mine")
        sent, learned = await apollo_call(first, feed, token)
        assert sent == 2 and learned["data"]["feed"]["edges"][0]["node"]["body"] == "mine"
        before = text_plans_answered()
        # The other process finds it in Redis (the regular path), then holds it: compiled.
        for _ in range(2):
            sent, answer = await apollo_call(second, feed, token)
            assert (sent, answer) == (1, learned)
        assert text_plans_answered() == before + 1
        assert answer["data"]["feed"]["__typename"] == "FeedConnection"
        assert answer["data"]["feed"]["edges"][0]["node"]["__typename"] == "Post"


async def test_a_hash_that_is_not_the_texts_is_refused_and_not_kept(state: AppState) -> None:
    text, other = "{ viewer { id } }", "{ viewer { handle } }"
    async with api_process(state) as client:
        refused = await send(client, {"query": text, "extensions": apq(other)})
        assert refused["data"] is None and codes(refused) == ["BAD_USER_INPUT"]
        still = await send(client, {"extensions": apq(other)})
        assert codes(still) == [NOT_FOUND]
    assert await state.roles.sessions.hexists(TEXTS_KEY, sha256_hex(other)) == 0


async def test_a_text_that_fails_validation_is_never_kept(state: AppState) -> None:
    """Neither a document graphql's rules refuse nor one over the cost limit is learned."""
    invalid = "query Bad { viewer { noSuchField } }"
    costly = (
        "query Costly { viewer { followers(first: 100) { edges { node "
        "{ followers(first: 100) { edges { node { id } } } } } } } }"
    )
    async with api_process(state) as client:
        for text, why in ((invalid, "noSuchField"), (costly, "costs")):
            answer = await send(client, {"query": text, "extensions": apq(text)})
            assert answer.get("data") is None and why in answer["errors"][0]["message"], answer
            again = await send(client, {"extensions": apq(text)})
            assert codes(again) == [NOT_FOUND], text
    assert await state.roles.sessions.zcard(INDEX_KEY) == 0


async def test_a_flood_from_one_client_stays_within_its_budget(
    state: AppState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """APQ_MAX_DOCUMENTS 5, 3 new documents per client and hour: a client flooding distinct
    texts gets every answer but teaches 3, so it cannot push out another's document; only
    the cap (with other clients' learning) does, least recently looked up first."""
    settings = get_settings()
    monkeypatch.setattr(settings, "apq_max_documents", 5)
    monkeypatch.setattr(settings, "apq_learn_per_client_per_hour", 3)
    kept = "query Kept { viewer { handle } }"
    async with api_process(state) as client:
        alice = await sign_up(client, "alice")
        mallory = await sign_up(client, "mallory")
        carol = await sign_up(client, "carol")
        assert (await apollo_call(client, kept, alice))[0] == 2
        flood = [f"query Flood{n} {{ viewer {{ id }} }}" for n in range(12)]
        for text in flood:
            sent, answer = await apollo_call(client, text, mallory)
            assert sent == 2 and answer["data"]["viewer"]["id"], answer  # answered, all
    redis = state.roles.sessions
    assert await redis.zcard(INDEX_KEY) == 4  # alice's and 3 of mallory's
    async with api_process(state) as fresh:  # a process that holds nothing of its own
        sent, answer = await apollo_call(fresh, kept, alice)
        assert (sent, answer) == (1, {"data": {"viewer": {"handle": "alice"}}})
        taught = [t for t in flood if (await apollo_call(fresh, t, mallory))[0] == 1]
        assert len(taught) == 3
        # The same flood again teaches nothing more this hour.
        assert await redis.zcard(INDEX_KEY) == 4
        # The cap: a third client's documents push out the least recently looked up.
        for n in range(3):
            await apollo_call(fresh, f"query Carol{n} {{ viewer {{ handle }} }}", carol)
    assert await redis.zcard(INDEX_KEY) == 5
    assert await redis.zscore(INDEX_KEY, sha256_hex(kept)) is None  # the oldest lookup
    assert await redis.hexists(TEXTS_KEY, sha256_hex(kept)) == 0
    assert await redis.hlen(TEXTS_KEY) == 5


async def test_trusted_documents_only_refuses_learned_documents(
    state: AppState, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "query Learned { viewer { handle } }"
    async with api_process(state) as client:
        assert (await apollo_call(client, text))[0] == 2
        assert (await apollo_call(client, text))[0] == 1
    monkeypatch.setattr(get_settings(), "trusted_documents_only", True)
    async with api_process(state) as trusted:
        by_hash = await send(trusted, {"extensions": apq(text)})
        assert codes(by_hash) == [NOT_FOUND]
        with_text = await send(trusted, {"query": text, "extensions": apq(text)})
        assert with_text["data"] is None and codes(with_text) == ["BAD_USER_INPUT"]
        assert "only registered documents" in with_text["errors"][0]["message"].lower()


async def test_a_learned_document_runs_by_hash_over_the_websocket() -> None:
    """A graphql-transport-ws `subscribe` naming a learned hash runs its text, in a process
    (uvicorn) other than the one that learned it; an unknown hash is still not found."""
    text = "query SocketLearned { viewer { handle } }"
    async with ApiServer() as learner, ApiServer() as api:
        async with learner.http() as http:
            token = await sign_up(http, "alice")
            assert (await apollo_call(http, text, token))[0] == 2
        live = await LiveClient.open(api, token, subscribe=False)
        try:

            async def subscribe(op_id: str, payload: dict[str, Any]) -> dict[str, Any]:
                message = {"id": op_id, "type": "subscribe", "payload": payload}
                await live.ws.send(json.dumps(message))
                while True:
                    answer = json.loads(await asyncio.wait_for(live.ws.recv(), 5))
                    if answer["type"] == "ping":
                        await live.ws.send(json.dumps({"type": "pong"}))
                    elif answer["type"] != "complete":  # the query before ends with one
                        assert answer["id"] == op_id, answer
                        return dict(answer)

            learned = await subscribe("1", {"query": "", "extensions": apq(text)})
            assert learned["type"] == "next", learned
            assert learned["payload"] == {"data": {"viewer": {"handle": "alice"}}}
            unknown = await subscribe("2", {"query": "", "extensions": apq("{ viewer { id } }")})
            assert unknown["type"] == "error"
            assert unknown["payload"][0]["extensions"]["code"] == NOT_FOUND
        finally:
            await live.close()
