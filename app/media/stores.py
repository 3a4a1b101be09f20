"""The object store a process uses (MEDIA_STORE), built once by the composition root."""

from __future__ import annotations

from pathlib import Path

from app.config import RUN_DIR, Settings
from app.media.local_store import LocalStore
from app.media.store import ObjectStore


def local_dir(settings: Settings) -> Path:
    """MEDIA_LOCAL_DIR, or <RUN_DIR>/media (beside the embedded servers' data)."""
    return Path(settings.media_local_dir) if settings.media_local_dir else RUN_DIR / "media"


def make_store(settings: Settings) -> ObjectStore:
    """MEDIA_STORE=local: the directory the service serves itself; s3: an S3-compatible
    bucket (app.media.s3_store, imported only when chosen: its client is not loaded
    otherwise)."""
    if settings.media_store == "s3":
        from app.media.s3_store import S3Store  # only when configured

        return S3Store(
            bucket=settings.media_s3_bucket,
            region=settings.media_s3_region,
            endpoint_url=settings.media_s3_endpoint_url or None,
            access_key_id=settings.media_s3_access_key_id or None,
            secret_access_key=settings.media_s3_secret_access_key or None,
            # MEDIA_PUBLIC_BASE_URL is put before PUBLIC posts' URLs only (app.media.urls).
            public_base_url=None,
            addressing_style=settings.media_s3_addressing_style,
            url_signature_lifetime_seconds=settings.media_s3_url_signature_lifetime_seconds,
            key_prefix=settings.media_s3_key_prefix,
            timeout_seconds=settings.media_s3_timeout_seconds,
        )
    return LocalStore(local_dir(settings), settings.secret_key)
