"""A document is validated once, however often it is sent: the limit rules are built once
(app.api.endpoint.schema.build_schema), so Strawberry's ValidationCache, keyed on the document and
the rule classes, hits. Rules made anew per request never hit (issue 10: 30-50% of CPU)."""

from __future__ import annotations

import uuid

import httpx
from strawberry.extensions.validation_cache import _get_validate_cache

from app.api.endpoint.schema import DOCUMENT_CACHE_SIZE


async def test_a_repeated_document_is_validated_once(client: httpx.AsyncClient) -> None:
    validate = _get_validate_cache(DOCUMENT_CACHE_SIZE)
    # A text no other test sends, so the first request is a miss whatever ran before.
    query = f"query Probe_{uuid.uuid4().hex} {{ viewer {{ id }} }}"
    before = validate.cache_info()
    for _ in range(5):
        response = await client.post("/graphql", json={"query": query})
        assert response.status_code == 200
        assert response.json() == {"data": {"viewer": None}}
    after = validate.cache_info()
    assert after.misses - before.misses == 1  # validated once
    assert after.hits - before.hits == 4  # then answered from the cache


async def test_limits_still_apply_to_a_cached_document(client: httpx.AsyncClient) -> None:
    deep = "{ viewer { " + "posts { edges { node { author { " * 4 + "id" + " } } } }" * 4 + " } }"
    for _ in range(2):  # the second answer comes from the cache: the same error
        response = await client.post("/graphql", json={"query": deep})
        errors = response.json()["errors"]
        assert errors[0]["extensions"]["code"] == "BAD_USER_INPUT"
        assert "depth" in errors[0]["message"]
