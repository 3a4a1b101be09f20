"""What every `ObjectStore` (app/media/store.py) promises, checked through the URLs it hands
out: async functions taking a store and an httpx client that reaches those URLs. A store's
test module runs each of them (tests/media/test_s3_store.py does for the S3 store); the same
functions run against any other store.

`http` must refuse what the store's server refuses: for S3 behind moto that is
`tests/media/sigv4_gate.SigV4Gate` (moto does not check presigned URLs itself)."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from email.utils import parsedate_to_datetime

import httpx
import pytest

from app.media.store import ObjectStore

PNG = "image/png"
BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # the bytes need not be a real image


def new_key() -> str:
    return f"contract/{uuid.uuid4().hex}"


async def put(http: httpx.AsyncClient, store: ObjectStore, key: str, data: bytes) -> None:
    """Upload `data` the way a client does: through a presigned PUT, its headers as given."""
    presigned = await store.presign_put(key, PNG, len(data), expires_in=300)
    answer = await http.put(presigned.url, headers=presigned.headers, content=data)
    assert answer.is_success, answer.text


async def presigned_put_stores_the_bytes(store: ObjectStore, http: httpx.AsyncClient) -> None:
    key = new_key()
    before = int(time.time())
    presigned = await store.presign_put(key, PNG, len(BYTES), expires_in=300)
    assert before + 300 <= presigned.expires_at <= int(time.time()) + 300
    assert {name.lower() for name in presigned.headers} >= {"content-type", "content-length"}
    answer = await http.put(presigned.url, headers=presigned.headers, content=BYTES)
    assert answer.is_success, answer.text
    assert await store.read(key, max_bytes=len(BYTES)) == BYTES
    assert await store.exists(key)


async def presigned_put_refuses_another_type(store: ObjectStore, http: httpx.AsyncClient) -> None:
    key = new_key()
    presigned = await store.presign_put(key, PNG, len(BYTES), expires_in=300)
    headers = {**presigned.headers, "Content-Type": "text/html"}
    answer = await http.put(presigned.url, headers=headers, content=BYTES)
    assert answer.status_code in (400, 403), answer.text
    assert not await store.exists(key)


async def presigned_put_refuses_a_longer_body(store: ObjectStore, http: httpx.AsyncClient) -> None:
    key = new_key()
    presigned = await store.presign_put(key, PNG, len(BYTES), expires_in=300)
    # The client sends the true length of what it sends (HTTP leaves it no other choice).
    headers = {k: v for k, v in presigned.headers.items() if k.lower() != "content-length"}
    answer = await http.put(presigned.url, headers=headers, content=BYTES + b"more")
    assert answer.status_code in (400, 403, 413), answer.text
    assert not await store.exists(key)


def freshness_end(answer: httpx.Response, asked_at: float) -> float:
    """When a cache stops reusing `answer` (epoch seconds): max-age wins over Expires."""
    cache_control = answer.headers.get("cache-control", "")
    assert "no-store" not in cache_control
    max_age = re.search(r"(?:^|[ ,])max-age=(\d+)", cache_control)
    if max_age:
        return asked_at + int(max_age.group(1))
    assert "expires" in answer.headers, "neither max-age nor Expires: caches would guess"
    return parsedate_to_datetime(answer.headers["expires"]).timestamp()


async def get_url_serves_the_bytes_with_fixed_headers(
    store: ObjectStore, http: httpx.AsyncClient, *, nosniff: bool = True
) -> None:
    """The fixed type (whatever was uploaded), cacheable no longer than the URL lives, and
    nosniff when the store's server can add it (`nosniff=False`: the CDN adds it)."""
    key = new_key()
    await store.write(key, BYTES, "application/octet-stream")
    expires_at = int(time.time()) + 600
    asked_at = time.time()
    answer = await http.get(await store.get_url(key, expires_at, PNG))
    assert answer.status_code == 200, answer.text
    assert answer.content == BYTES
    assert answer.headers["content-type"] == PNG
    assert asked_at < freshness_end(answer, asked_at) <= expires_at
    if nosniff:
        assert answer.headers["x-content-type-options"] == "nosniff"


async def get_url_refused_once_expired(store: ObjectStore, http: httpx.AsyncClient) -> None:
    key = new_key()
    await store.write(key, BYTES, PNG)
    answer = await http.get(await store.get_url(key, int(time.time()) - 1, PNG))
    assert answer.status_code in (403, 404, 410), answer.text
    assert answer.content != BYTES


async def next_second() -> None:
    """Wait until the wall clock's second has changed (signatures stamp whole seconds)."""
    start = int(time.time())
    await asyncio.sleep(1 - time.time() % 1 + 0.001)
    assert int(time.time()) > start


async def get_url_is_the_same_for_the_same_arguments(
    store: ObjectStore, http: httpx.AsyncClient
) -> None:
    key = new_key()
    await store.write(key, BYTES, PNG)
    expires_at = int(time.time()) + 600
    first = await store.get_url(key, expires_at, PNG)
    await next_second()  # a URL that stamped the clock would change now
    assert await store.get_url(key, expires_at, PNG) == first
    assert (await http.get(first)).content == BYTES
    others = {
        await store.get_url(key, expires_at + 60, PNG),
        await store.get_url(key, expires_at, "image/jpeg"),
        await store.get_url(new_key(), expires_at, PNG),
    }
    assert first not in others and len(others) == 3


async def read_refuses_an_object_over_the_cap(store: ObjectStore, http: httpx.AsyncClient) -> None:
    key = new_key()
    await put(http, store, key, BYTES)
    assert await store.read(key, max_bytes=len(BYTES)) == BYTES
    with pytest.raises(ValueError):
        await store.read(key, max_bytes=len(BYTES) - 1)


async def missing_keys(store: ObjectStore, http: httpx.AsyncClient) -> None:
    """A missing key reads as None, does not exist, and deletes without error."""
    key = new_key()
    assert await store.read(key, max_bytes=10) is None
    assert not await store.exists(key)
    await store.delete(key)


async def write_overwrites_and_delete_removes(store: ObjectStore, http: httpx.AsyncClient) -> None:
    key = new_key()
    await store.write(key, b"first", PNG)
    await store.write(key, BYTES, PNG)
    assert await store.read(key, max_bytes=len(BYTES)) == BYTES
    await store.delete(key)
    assert not await store.exists(key)
    assert await store.read(key, max_bytes=len(BYTES)) is None
    await store.delete(key)


CONTRACT = [
    presigned_put_stores_the_bytes,
    presigned_put_refuses_another_type,
    presigned_put_refuses_a_longer_body,
    get_url_refused_once_expired,
    get_url_is_the_same_for_the_same_arguments,
    read_refuses_an_object_over_the_cap,
    missing_keys,
    write_overwrites_and_delete_removes,
]
"""Every check but the header one, which takes the store's `nosniff` (run it apart)."""
