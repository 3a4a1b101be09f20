"""The embedded object store (MEDIA_STORE=local, `make run`'s default): a directory, one file
per key, served by the service itself under URLs signed with a media sub-key of SECRET_KEY
(app.media.keys). The HTTP side (app.api.transports.media_files) asks this module whether a
request's URL is good and hands it the body; nothing here knows HTTP.

A URL names the key, the fixed Content-Type, the expiry (and for a PUT the exact length, for
a GET the cache scope) and their signature; changing any of them breaks the signature. A
PUT goes to a temporary file and is linked into place only when whole, once: a second PUT
to the same key is refused. Nothing lists the directory."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import secrets
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

from app.media.constants import CONTENT_TYPES
from app.media.keys import URL_SIGNATURE_LABEL, is_key, sub_key
from app.media.store import ObjectStore, PresignedPut

ROUTE_PREFIX = "/media/"  # app.web mounts the transport here
_QUOTED_TYPES = {kind: quote(kind, safe="") for kind in CONTENT_TYPES}


class Refused(Exception):
    """A request the store will not serve; `status` is the HTTP answer."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class GetGrant:
    """A checked GET: the file, what to send it as, and for how long it may be cached."""

    path: Path
    content_type: str
    public: bool
    max_age_seconds: int


@dataclass(frozen=True, slots=True)
class PutGrant:
    key: str
    content_type: str
    byte_size: int


class LocalStore(ObjectStore):
    """ObjectStore over `directory`; its URLs are root-relative (`/media/<key>?...`): the
    service serves them on whatever origin the client reached it at (MEDIA_PUBLIC_BASE_URL
    puts a CDN's origin before PUBLIC posts' ones: app.media.urls)."""

    def __init__(self, directory: Path, secret_key: str) -> None:
        self.directory = directory
        self._key = sub_key(secret_key, URL_SIGNATURE_LABEL)

    # -- signing -------------------------------------------------------------------------------

    def _sign(self, *fields: str) -> str:
        return hmac.digest(self._key, "\n".join(fields).encode(), "sha256").hex()

    def _path(self, key: str) -> Path:
        if not is_key(key):
            raise ValueError("not a media key")
        return self.directory / key

    # -- ObjectStore -----------------------------------------------------------------------

    async def presign_put(
        self, key: str, content_type: str, byte_size: int, expires_in: int
    ) -> PresignedPut:
        self._path(key)
        expires_at = int(time.time()) + expires_in
        signature = self._sign("PUT", key, content_type, str(byte_size), str(expires_at))
        query = urlencode({"exp": expires_at, "len": byte_size, "ct": content_type})
        return PresignedPut(
            url=f"{ROUTE_PREFIX}{quote(key)}?{query}&sig={signature}",
            headers={"Content-Type": content_type, "Content-Length": str(byte_size)},
            expires_at=expires_at,
        )

    async def get_url(
        self, key: str, expires_at: int, content_type: str, *, public: bool = False
    ) -> str:
        if not is_key(key):
            raise ValueError("not a media key")
        scope = "public" if public else "private"
        signature = self._sign("GET", key, content_type, str(expires_at), scope)
        # Built by hand: a page mints a URL per image (urlencode was most of the cost), and
        # every part is URL-safe already but the content type's slash.
        kind = _QUOTED_TYPES.get(content_type) or quote(content_type, safe="")
        return f"{ROUTE_PREFIX}{key}?exp={expires_at}&ct={kind}&cc={scope}&sig={signature}"

    async def read(self, key: str, max_bytes: int) -> bytes | None:
        path = self._path(key)
        return await asyncio.to_thread(_read_bounded, path, max_bytes)

    async def write(self, key: str, data: bytes, content_type: str) -> None:
        path = self._path(key)
        await asyncio.to_thread(_write_replace, path, data)

    async def exists(self, key: str) -> bool:
        return await asyncio.to_thread(self._path(key).exists)

    async def delete(self, key: str) -> None:
        path = self._path(key)
        await asyncio.to_thread(path.unlink, True)

    async def close(self) -> None:
        return None

    # -- the HTTP side's questions -----------------------------------------------------------

    def _fresh(self, params: Mapping[str, str]) -> int:
        try:
            expires_at = int(params["exp"])
        except (KeyError, ValueError):
            raise Refused(403, "no expiry") from None
        remaining = expires_at - int(time.time())
        if remaining <= 0:
            raise Refused(403, "expired")
        return remaining

    def _signed(self, params: Mapping[str, str], *fields: str) -> None:
        given = params.get("sig", "")
        if not hmac.compare_digest(given.encode(), self._sign(*fields).encode()):
            raise Refused(403, "bad signature")

    def check_get(self, key: str, params: Mapping[str, str]) -> GetGrant:
        """A GET's URL checked: signature, expiry, one of the image types; the file."""
        if not is_key(key):
            raise Refused(404, "no such object")
        content_type, scope = params.get("ct", ""), params.get("cc", "")
        self._signed(params, "GET", key, content_type, params.get("exp", ""), scope)
        remaining = self._fresh(params)
        if content_type not in CONTENT_TYPES or scope not in ("public", "private"):
            raise Refused(403, "not servable")
        path = self._path(key)
        if not path.is_file():
            raise Refused(404, "no such object")
        return GetGrant(path, content_type, scope == "public", remaining)

    def check_put(
        self, key: str, params: Mapping[str, str], headers: Mapping[str, str]
    ) -> PutGrant:
        """A PUT's URL and headers checked: signature, expiry, exactly the signed type and
        length."""
        if not is_key(key):
            raise Refused(404, "no such upload")
        content_type, length = params.get("ct", ""), params.get("len", "")
        self._signed(params, "PUT", key, content_type, length, params.get("exp", ""))
        self._fresh(params)
        if headers.get("content-type") != content_type:
            raise Refused(400, "Content-Type differs from the signed one")
        if headers.get("content-length") != length:
            raise Refused(400, "Content-Length differs from the signed one")
        return PutGrant(key, content_type, int(length))

    async def receive(self, grant: PutGrant, chunks: AsyncIterator[bytes]) -> None:
        """The body into a temporary file, refused as soon as it passes the signed length (or
        ends short of it), then linked into place: at most one PUT per key succeeds."""
        final = self._path(grant.key)
        if final.exists():
            raise Refused(409, "already uploaded")
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.directory / f".put-{secrets.token_hex(8)}"
        received = 0
        try:
            with temporary.open("wb") as out:
                async for chunk in chunks:
                    received += len(chunk)
                    if received > grant.byte_size:
                        raise Refused(413, "larger than declared")
                    out.write(chunk)
            if received != grant.byte_size:
                raise Refused(400, "shorter than declared")
            try:
                os.link(temporary, final)
            except FileExistsError:
                raise Refused(409, "already uploaded") from None
        finally:
            temporary.unlink(missing_ok=True)


def _read_bounded(path: Path, max_bytes: int) -> bytes | None:
    try:
        with path.open("rb") as source:
            if os.fstat(source.fileno()).st_size > max_bytes:
                raise ValueError(f"object larger than {max_bytes} bytes")
            data = source.read(max_bytes + 1)
    except FileNotFoundError:
        return None
    if len(data) > max_bytes:
        raise ValueError(f"object larger than {max_bytes} bytes")
    return data


def _write_replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".w-{secrets.token_hex(8)}")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
