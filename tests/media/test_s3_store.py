"""The S3 store (app/media/s3_store.py) against moto's S3 server, a real S3 HTTP API on a port
of this module's own: the store contract (tests/media/store_contract.py) through the URLs it
hands out, with S3's presigned-URL check in front (`SigV4Gate`: moto serves presigned URLs
without checking them), and what only the S3 store does."""

from __future__ import annotations

import asyncio
import time
from calendar import timegm
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import botocore.auth
import httpx
import pytest
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.endpoint import DEFAULT_TIMEOUT
from botocore.exceptions import ReadTimeoutError

from app.media.s3_store import GET_CACHE_CONTROL, SIGV4_MAX_EXPIRES_SECONDS, S3Store
from app.media.store import ObjectStore
from tests.media import store_contract
from tests.media.sigv4_gate import SigV4Gate

BUCKET = "media-test"
ACCESS_KEY_ID = "AKIAMEDIATEST"
SECRET_ACCESS_KEY = "media-test-secret"


def make_store(moto_url: str, **overrides: Any) -> S3Store:
    arguments: dict[str, Any] = {
        "bucket": BUCKET,
        "region": "eu-west-1",
        "endpoint_url": moto_url,
        "access_key_id": ACCESS_KEY_ID,
        "secret_access_key": SECRET_ACCESS_KEY,
        "addressing_style": "path",
    }
    return S3Store(**{**arguments, **overrides})


@pytest.fixture(scope="module")
async def store(moto_url: str) -> AsyncIterator[S3Store]:
    store = make_store(moto_url)
    client = await store.client()
    await client.create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    yield store
    await store.close()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=SigV4Gate(SECRET_ACCESS_KEY)) as client:
        yield client


@pytest.mark.parametrize("check", store_contract.CONTRACT, ids=lambda check: check.__name__)
async def test_store_contract(
    check: Callable[[ObjectStore, httpx.AsyncClient], Awaitable[None]],
    store: S3Store,
    http: httpx.AsyncClient,
) -> None:
    await check(store, http)


async def test_get_url_headers_without_nosniff(store: S3Store, http: httpx.AsyncClient) -> None:
    """S3 cannot add nosniff to a presigned GET: the CDN does (docs/DEPLOYMENT.md)."""
    await store_contract.get_url_serves_the_bytes_with_fixed_headers(store, http, nosniff=False)


async def test_the_gate_refuses_what_s3_would(store: S3Store, http: httpx.AsyncClient) -> None:
    """The contract's refusals come from checking signatures: a URL whose signature was
    tampered with is refused, and the same URL goes through moto unchecked."""
    key = store_contract.new_key()
    await store.write(key, b"bytes", "image/png")
    url = await store.get_url(key, int(time.time()) + 600, "image/png")
    assert (await http.get(url)).status_code == 200
    forged = url.replace("response-content-type=image%2Fpng", "response-content-type=text%2Fhtml")
    assert (await http.get(forged)).status_code == 403
    assert http._transport.refusals[-1] == "SignatureDoesNotMatch"  # type: ignore[attr-defined]
    async with httpx.AsyncClient() as unchecked:
        assert (await unchecked.get(forged)).headers["content-type"] == "text/html"


async def test_presigned_put_signs_type_and_length(store: S3Store) -> None:
    presigned = await store.presign_put("k", "image/webp", 1234, expires_in=60)
    query = parse_qs(urlsplit(presigned.url).query)
    assert query["X-Amz-SignedHeaders"] == ["content-length;content-type;host"]
    assert query["X-Amz-Expires"] == ["60"]
    assert presigned.headers == {"Content-Type": "image/webp", "Content-Length": "1234"}
    with pytest.raises(ValueError):
        await store.presign_put("k", "image/webp", 1234, expires_in=SIGV4_MAX_EXPIRES_SECONDS + 1)


async def test_get_url_signed_from_expiry_alone(moto_url: str, store: S3Store) -> None:
    """Signed at expires_at - lifetime, whenever and by whichever process it is minted: a
    second store (another API process) gives the same URL; an expiry further ahead than the
    lifetime is refused (its signing time would be in the future)."""
    expires_at = int(time.time()) + 3600
    url = await store.get_url("k", expires_at, "image/png")
    query = parse_qs(urlsplit(url).query)
    signed_at = timegm(time.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ"))
    assert signed_at == expires_at - SIGV4_MAX_EXPIRES_SECONDS
    assert query["X-Amz-Expires"] == [str(SIGV4_MAX_EXPIRES_SECONDS)]
    other = make_store(moto_url)
    try:
        assert await other.get_url("k", expires_at, "image/png") == url
    finally:
        await other.close()
    with pytest.raises(ValueError):
        await store.get_url("k", int(time.time()) + SIGV4_MAX_EXPIRES_SECONDS + 60, "image/png")


async def test_shorter_signature_lifetime(moto_url: str, http: httpx.AsyncClient) -> None:
    """A bucket policy may cap a signature's age (`s3:signatureAge`): a shorter lifetime
    signs later, and still serves."""
    store = make_store(moto_url, url_signature_lifetime_seconds=3600)
    try:
        key = store_contract.new_key()
        await store.write(key, b"bytes", "image/png")
        url = await store.get_url(key, int(time.time()) + 600, "image/png")
        assert parse_qs(urlsplit(url).query)["X-Amz-Expires"] == ["3600"]
        assert (await http.get(url)).content == b"bytes"
        with pytest.raises(ValueError):
            await store.get_url(key, int(time.time()) + 3700, "image/png")
    finally:
        await store.close()


async def test_public_base_url_replaces_the_origin(moto_url: str, store: S3Store) -> None:
    """A CDN in front of the bucket: same path and query (the signature covers the origin's
    host, which the CDN sends to the bucket), the CDN's origin."""
    cdn = make_store(moto_url, public_base_url="https://cdn.example.test/")
    try:
        expires_at = int(time.time()) + 600
        direct = urlsplit(await store.get_url("a/b.png", expires_at, "image/png"))
        through_cdn = await cdn.get_url("a/b.png", expires_at, "image/png")
        assert through_cdn == f"https://cdn.example.test{direct.path}?{direct.query}"
    finally:
        await cdn.close()


async def test_read_refuses_an_oversized_object_before_downloading_it(
    store: S3Store, http: httpx.AsyncClient
) -> None:
    """A HEAD says the size; the GET is never sent."""
    key = store_contract.new_key()
    await store.write(key, b"x" * 4096, "image/png")
    sent: list[str] = []

    def record(request: Any, **_: Any) -> None:
        sent.append(request.method)

    client = await store.client()
    client.meta.events.register("before-send.s3", record)
    try:
        with pytest.raises(ValueError):
            await store.read(key, max_bytes=4095)
        assert sent == ["HEAD"]
        assert await store.read(key, max_bytes=4096) == b"x" * 4096
        assert sent == ["HEAD", "HEAD", "GET"]
    finally:
        client.meta.events.unregister("before-send.s3", record)


async def test_one_client_for_the_store_life(moto_url: str) -> None:
    store = make_store(moto_url)
    try:
        first = await store.client()
        await store.exists("k")
        assert await store.client() is first
        await store.close()
        assert await store.client() is not first  # usable again after close
    finally:
        await store.close()


async def test_key_prefix(moto_url: str, store: S3Store, http: httpx.AsyncClient) -> None:
    """Every key of a prefixed store lives under the prefix (what an IAM policy grants)."""
    prefixed = make_store(moto_url, key_prefix="media/")
    try:
        key = store_contract.new_key()
        await store_contract.put(http, prefixed, key, b"bytes")
        assert await store.read(f"media/{key}", max_bytes=5) == b"bytes"
        assert not await store.exists(key)
        url = await prefixed.get_url(key, int(time.time()) + 600, "image/png")
        assert urlsplit(url).path == f"/{BUCKET}/media/{key}"
        assert (await http.get(url)).content == b"bytes"
        await prefixed.delete(key)
        assert not await store.exists(f"media/{key}")
    finally:
        await prefixed.close()


async def test_a_silent_bucket_fails_within_the_timeout() -> None:
    """An endpoint that accepts and never answers: 3 tries of `timeout_seconds` (plus the
    retries' backoff, up to 1 + 2 s), not botocore's 60 s each."""
    hung: list[asyncio.StreamWriter] = []

    async def never_answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hung.append(writer)

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = make_store(f"http://127.0.0.1:{port}", timeout_seconds=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(ReadTimeoutError):
            await store.exists("k")
        assert len(hung) == 3
        # botocore's default read timeout: one try alone would take that long.
        assert time.monotonic() - started < DEFAULT_TIMEOUT
    finally:
        await store.close()
        for writer in hung:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_get_url_is_botocores_presigned_url_at_the_signing_time(
    moto_url: str, store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixed-clock signer changes the clock only: with botocore's clock set to the
    signing time, a plain client presigns the very same URL."""
    expires_at = int(time.time()) + 600
    url = await store.get_url("a/b.png", expires_at, "image/png", public=True)
    signed_at = datetime.fromtimestamp(expires_at - SIGV4_MAX_EXPIRES_SECONDS, UTC)
    monkeypatch.setattr(
        botocore.auth, "get_current_datetime", lambda: signed_at.replace(tzinfo=None)
    )
    async with get_session().create_client(
        "s3",
        region_name="eu-west-1",
        endpoint_url=moto_url,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
        config=AioConfig(s3={"addressing_style": "path"}, signature_version="s3v4"),
    ) as plain:
        expected = await plain.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": BUCKET,
                "Key": "a/b.png",
                "ResponseContentType": "image/png",
                "ResponseCacheControl": GET_CACHE_CONTROL,
                "ResponseExpires": datetime.fromtimestamp(expires_at, UTC),
            },
            ExpiresIn=SIGV4_MAX_EXPIRES_SECONDS,
        )
    assert url == expected
