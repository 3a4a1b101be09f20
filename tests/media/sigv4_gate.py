"""S3's check of a presigned (SigV4 query-string) URL, in front of moto's S3 server, which
does not make it: moto 5 serves a presigned URL whatever its signature, its signed headers or
its expiry (decision 0081). `SigV4Gate` is an httpx transport that refuses (403, as S3 does)
a request whose signature does not verify against the request actually sent, or whose URL has
expired or is not valid yet, and forwards the others to the real server over HTTP.

Written from AWS's description of SigV4 (hashlib and hmac, not botocore), so a URL botocore
signed wrongly, or a store that signs too little, fails here as it would on S3."""

from __future__ import annotations

import hashlib
import hmac
import time
from calendar import timegm
from urllib.parse import parse_qsl, quote

import httpx

# How far ahead of the server's clock S3 accepts a request's signing time.
CLOCK_SKEW_SECONDS = 15 * 60


def _uri_encode(value: str) -> str:
    return quote(value, safe="-_.~")


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


class SigV4Gate(httpx.AsyncBaseTransport):
    """Verifies presigned requests with the one secret key it knows; passes unsigned ones."""

    def __init__(self, secret_access_key: str) -> None:
        self._secret = secret_access_key
        self._upstream = httpx.AsyncHTTPTransport()
        self.refusals: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raw_path, _, raw_query = request.url.raw_path.decode().partition("?")
        params = parse_qsl(raw_query, keep_blank_values=True)
        if any(name == "X-Amz-Signature" for name, _ in params):
            refusal = self._refusal(request, raw_path, params)
            if refusal is not None:
                self.refusals.append(refusal)
                return httpx.Response(403, text=refusal, request=request)
        return await self._upstream.handle_async_request(request)

    def _refusal(
        self, request: httpx.Request, raw_path: str, params: list[tuple[str, str]]
    ) -> str | None:
        query = dict(params)
        signed_at = timegm(time.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))
        now = time.time()
        if now > signed_at + int(query["X-Amz-Expires"]):
            return "AccessDenied: Request has expired"
        if signed_at > now + CLOCK_SKEW_SECONDS:
            return "AccessDenied: Request is not valid yet"
        signed_headers = query["X-Amz-SignedHeaders"].split(";")
        headers = request.headers
        if any(name not in headers for name in signed_headers):
            return "SignatureDoesNotMatch: a signed header is missing"
        canonical_query = "&".join(
            f"{_uri_encode(name)}={_uri_encode(value)}"
            for name, value in sorted(params)
            if name != "X-Amz-Signature"
        )
        canonical_headers = "".join(
            f"{name}:{' '.join(headers[name].split())}\n" for name in sorted(signed_headers)
        )
        canonical_request = "\n".join(
            [
                request.method,
                raw_path,
                canonical_query,
                canonical_headers,
                ";".join(sorted(signed_headers)),
                "UNSIGNED-PAYLOAD",
            ]
        )
        _, date, region, service, terminal = query["X-Amz-Credential"].split("/")
        scope = "/".join([date, region, service, terminal])
        string_to_sign = "\n".join(
            [
                "AWS4-HMAC-SHA256",
                query["X-Amz-Date"],
                scope,
                hashlib.sha256(canonical_request.encode()).hexdigest(),
            ]
        )
        key = f"AWS4{self._secret}".encode()
        for part in (date, region, service, terminal):
            key = _hmac(key, part)
        expected = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, query["X-Amz-Signature"]):
            return "SignatureDoesNotMatch"
        return None

    async def aclose(self) -> None:
        await self._upstream.aclose()
