"""The object store on any S3-compatible bucket (AWS S3, Cloudflare R2, MinIO, ...) through
aiobotocore (decision 0081): one client for the store's life, presigned PUTs whose signature
covers the upload's type and size, and presigned GETs that are the same URL for the same
arguments, so a CDN in front of the bucket caches one copy per image and window."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

import botocore
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.auth import SIGV4_TIMESTAMP, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials
from botocore.exceptions import ClientError

from app.media.store import PresignedPut

AddressingStyle = Literal["auto", "path", "virtual"]

# SigV4 refuses a presigned URL that claims to live longer than 7 days.
SIGV4_MAX_EXPIRES_SECONDS = 7 * 24 * 3600

# S3's answers for "no such object" (GET says NoSuchKey, HEAD only its status).
_MISSING = {"404", "NoSuchKey", "NotFound"}

# Every response served through a presigned GET: never revalidated while fresh (a key's bytes
# never change); a PUBLIC post's image cacheable by a CDN, any other by the viewer's browser
# only. How long it stays fresh is the response's Expires, the URL's own end (`S3Store.get_url`).
GET_CACHE_CONTROL = "public, immutable"
PRIVATE_CACHE_CONTROL = "private, immutable"


class FixedClockQueryAuth(S3SigV4QueryAuth):  # type: ignore[misc]  # botocore: untyped
    """botocore's presigned-URL signer (SigV4, query string) with the signing time given
    instead of read from the clock: botocore has no parameter for it (`SigV4Auth.add_auth`
    stamps `get_current_datetime()`), so this repeats `add_auth`'s five steps with the time
    replaced; canonical request, string to sign and signature are botocore's own."""

    def __init__(
        self, credentials: ReadOnlyCredentials, region: str, signed_at: int, expires_in: int
    ) -> None:
        super().__init__(credentials, "s3", region, expires=expires_in)
        self._signed_at = datetime.fromtimestamp(signed_at, UTC).replace(tzinfo=None)

    def add_auth(self, request: AWSRequest) -> None:
        request.context["timestamp"] = self._signed_at.strftime(SIGV4_TIMESTAMP)
        self._modify_request_before_signing(request)
        canonical_request = self.canonical_request(request)
        string_to_sign = self.string_to_sign(request, canonical_request)
        self._inject_signature_to_request(request, self.signature(string_to_sign, request))


def _unsigned_presigned_get(context: dict[str, Any], **_: Any) -> object:
    """`choose-signer` handler: this client's presigned GETs come out unsigned, so that
    `S3Store.get_url` signs them with a fixed clock; its GetObject calls sign as usual."""
    return botocore.UNSIGNED if context.get("is_presign_request") else None


class S3Store:
    """`ObjectStore` on one bucket. Credentials left None come from botocore's usual chain
    (environment, shared config, instance or task role); `public_base_url` (a CDN whose
    origin is the bucket's endpoint) replaces the origin of every GET URL handed out;
    `key_prefix` goes before every key (an IAM policy can then grant that prefix only)."""

    def __init__(
        self,
        *,
        bucket: str,
        region: str,
        endpoint_url: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        public_base_url: str | None = None,
        addressing_style: AddressingStyle = "auto",
        url_signature_lifetime_seconds: int = SIGV4_MAX_EXPIRES_SECONDS,
        key_prefix: str = "",
        timeout_seconds: float = 10.0,
    ) -> None:
        if not 1 <= url_signature_lifetime_seconds <= SIGV4_MAX_EXPIRES_SECONDS:
            raise ValueError("url_signature_lifetime_seconds must be 1..604800 (SigV4's cap)")
        if (access_key_id is None) != (secret_access_key is None):
            raise ValueError("give both access_key_id and secret_access_key, or neither")
        self.bucket = bucket
        self.region = region
        self._endpoint_url = endpoint_url
        self._access_key_id = access_key_id
        self._secret_access_key = secret_access_key
        self._public_base_url = public_base_url.rstrip("/") if public_base_url else None
        self._addressing_style = addressing_style
        self._signature_lifetime = url_signature_lifetime_seconds
        self._prefix = key_prefix
        self._timeout = timeout_seconds
        self._session = get_session()
        self._client: Any = None
        self._exit_stack = contextlib.AsyncExitStack()
        self._client_lock = asyncio.Lock()

    async def client(self) -> Any:
        """The store's one S3 client, created on first use (closed by `close`)."""
        if self._client is None:
            async with self._client_lock:
                if self._client is None:
                    self._client = await self._exit_stack.enter_async_context(
                        self._session.create_client(
                            "s3",
                            region_name=self.region,
                            endpoint_url=self._endpoint_url,
                            aws_access_key_id=self._access_key_id,
                            aws_secret_access_key=self._secret_access_key,
                            config=AioConfig(
                                s3={"addressing_style": self._addressing_style},
                                signature_version="s3v4",
                                # No default CRC32 checksums (botocore >= 1.36): R2, MinIO and
                                # older gateways refuse or mishandle them, and a presigned PUT
                                # would demand a checksum the browser cannot send.
                                request_checksum_calculation="when_required",
                                response_checksum_validation="when_required",
                                # Each try's connect and each read wait at most this long
                                # (botocore's default is 60 s), 3 tries in all.
                                connect_timeout=self._timeout,
                                read_timeout=self._timeout,
                                retries={"total_max_attempts": 3, "mode": "standard"},
                            ),
                        )
                    )
                    self._client.meta.events.register(
                        "choose-signer.s3.GetObject", _unsigned_presigned_get
                    )
        return self._client

    async def presign_put(
        self, key: str, content_type: str, byte_size: int, expires_in: int
    ) -> PresignedPut:
        if not 1 <= expires_in <= SIGV4_MAX_EXPIRES_SECONDS:
            raise ValueError("expires_in must be 1..604800 seconds (SigV4's cap)")
        client = await self.client()
        expires_at = int(time.time()) + expires_in
        url = await client.generate_presigned_url(
            "put_object",
            Params={
                "Bucket": self.bucket,
                "Key": self._prefix + key,
                "ContentType": content_type,
                "ContentLength": byte_size,
            },
            ExpiresIn=expires_in,
        )
        headers = {"Content-Type": content_type, "Content-Length": str(byte_size)}
        return PresignedPut(url=url, headers=headers, expires_at=expires_at)

    async def get_url(
        self, key: str, expires_at: int, content_type: str, *, public: bool = False
    ) -> str:
        """Signed as at `expires_at - url_signature_lifetime_seconds`, valid for that lifetime:
        the URL depends on the arguments (and the credentials) only. Its response has
        `content_type`, Cache-Control `public|private, immutable` and Expires `expires_at`,
        so no cache keeps it past the URL's end. Refuses an `expires_at` further than the
        lifetime ahead (its signing time would be in the future, which S3 refuses)."""
        signed_at = expires_at - self._signature_lifetime
        if signed_at > time.time():
            raise ValueError("expires_at is further ahead than url_signature_lifetime_seconds")
        client = await self.client()
        unsigned = await client.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self.bucket,
                "Key": self._prefix + key,
                "ResponseContentType": content_type,
                "ResponseCacheControl": GET_CACHE_CONTROL if public else PRIVATE_CACHE_CONTROL,
                "ResponseExpires": datetime.fromtimestamp(expires_at, UTC),
            },
        )
        request = AWSRequest(method="GET", url=unsigned)
        credentials = await self._credentials()
        FixedClockQueryAuth(credentials, self.region, signed_at, self._signature_lifetime).add_auth(
            request
        )
        return self._public(request.url)

    async def read(self, key: str, max_bytes: int) -> bytes | None:
        client = await self.client()
        try:
            head = await client.head_object(Bucket=self.bucket, Key=self._prefix + key)
            if head["ContentLength"] > max_bytes:
                raise ValueError(f"object {key!r} is larger than {max_bytes} bytes")
            if head["ContentLength"] == 0:
                return b""  # a range of an empty object is refused (416)
            # The object may have been replaced since the HEAD: ask for no more than allowed.
            got = await client.get_object(
                Bucket=self.bucket, Key=self._prefix + key, Range=f"bytes=0-{max_bytes}"
            )
        except ClientError as error:
            if _is_missing(error):
                return None
            raise
        async with got["Body"] as body:
            data: bytes = await body.read()
        if len(data) > max_bytes:
            raise ValueError(f"object {key!r} is larger than {max_bytes} bytes")
        return data

    async def write(self, key: str, data: bytes, content_type: str) -> None:
        client = await self.client()
        await client.put_object(
            Bucket=self.bucket, Key=self._prefix + key, Body=data, ContentType=content_type
        )

    async def exists(self, key: str) -> bool:
        client = await self.client()
        try:
            await client.head_object(Bucket=self.bucket, Key=self._prefix + key)
        except ClientError as error:
            if _is_missing(error):
                return False
            raise
        return True

    async def delete(self, key: str) -> None:
        client = await self.client()
        await client.delete_object(Bucket=self.bucket, Key=self._prefix + key)

    async def close(self) -> None:
        async with self._client_lock:
            await self._exit_stack.aclose()
            self._client = None
            self._exit_stack = contextlib.AsyncExitStack()

    async def _credentials(self) -> ReadOnlyCredentials:
        """The keys a URL is signed with: the explicit ones, or the chain's current ones."""
        if self._access_key_id is not None and self._secret_access_key is not None:
            return ReadOnlyCredentials(self._access_key_id, self._secret_access_key, None)
        found = await self._session.get_credentials()
        if found is None:
            raise botocore.exceptions.NoCredentialsError()
        frozen: ReadOnlyCredentials = await found.get_frozen_credentials()
        return frozen

    def _public(self, url: str) -> str:
        """`url` with its origin replaced by `public_base_url` (path and query kept)."""
        if self._public_base_url is None:
            return url
        parts = urlsplit(url)
        return f"{self._public_base_url}{parts.path}?{parts.query}"


def _is_missing(error: ClientError) -> bool:
    return str(error.response.get("Error", {}).get("Code")) in _MISSING
