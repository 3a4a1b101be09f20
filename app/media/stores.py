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

        return S3Store(settings)  # type: ignore[no-any-return]
    return LocalStore(local_dir(settings), settings.secret_key)
