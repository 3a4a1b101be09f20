"""The one interface every object store behind image posts implements (decision 0080): the
embedded local directory (`app.media.local_store`) and any S3-compatible bucket
(`app.media.s3_store`). Keys are opaque strings the media package makes up; a store never
lists, so nothing here lets a caller enumerate objects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PresignedPut:
    """Where a client PUTs an upload's bytes: the URL, the headers it must send as given
    (they are signed: Content-Type and Content-Length at least), and when the URL stops
    working (epoch seconds)."""

    url: str
    headers: dict[str, str]
    expires_at: int


class ObjectStore(Protocol):
    """Bytes by key. Every method is async and safe to call concurrently."""

    async def presign_put(
        self, key: str, content_type: str, byte_size: int, expires_in: int
    ) -> PresignedPut:
        """A URL that accepts exactly one PUT of `byte_size` bytes of `content_type` at `key`
        until it expires; anything else is refused by whoever serves the URL."""
        ...

    async def get_url(
        self, key: str, expires_at: int, content_type: str, *, public: bool = False
    ) -> str:
        """A URL that GETs `key` until `expires_at` (epoch seconds), served with exactly
        `content_type`, `X-Content-Type-Options: nosniff` and a freshness (Cache-Control max-age,
        or Expires) no longer than the URL lives: `public` (a shared cache, a CDN, may keep it:
        a PUBLIC post's image) or `private` (the viewer's browser only). Where the store cannot
        send nosniff (S3), the CDN in front adds it (docs/DEPLOYMENT.md). The same arguments
        give the same URL (a CDN caches it)."""
        ...

    async def read(self, key: str, max_bytes: int) -> bytes | None:
        """The object's bytes, None when there is no such object; refuses (ValueError) one
        larger than `max_bytes` without reading it whole."""
        ...

    async def write(self, key: str, data: bytes, content_type: str) -> None:
        """Store `data` at `key` (overwriting)."""
        ...

    async def exists(self, key: str) -> bool: ...

    async def delete(self, key: str) -> None:
        """Remove `key`; a missing key is not an error."""
        ...

    async def close(self) -> None: ...
