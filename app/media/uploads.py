"""Uploads and their attachment to posts (decision 0080); no GraphQL or HTTP here.

createUpload records what the client declares and hands out a presigned PUT, within the
user's budgets (MEDIA_UPLOADS_PER_DAY uploads and MEDIA_UPLOAD_BYTES_PER_DAY bytes over the
last 24 h, counted in SQL under a per-user lock). createPost attaches up to four of the
caller's own pending, unexpired uploads: their staged bytes are read (at most the declared
size), checked and stripped (app.media.checks), matched to a declared sha256, written once
as a media object keyed by their content, and the post_media rows go in with the post, in
its transaction. The staged objects are deleted after the commit (`Attached.staged`). An
upload id that is not the caller's is NOT_FOUND, as one that does not exist."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import MediaObject, PostMedia, Upload
from app.errors import BadInput, NotFound, RateLimited
from app.media.checks import check_content_type, check_image
from app.media.constants import BUDGET_WINDOW_SECONDS, MAX_MEDIA_PER_POST
from app.media.keys import object_key, staging_key, upload_id
from app.media.store import ObjectStore, PresignedPut
from app.text_rules import Kind, clean

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# pg_advisory_xact_lock's first key: one namespace for "a user's upload budget".
_BUDGET_LOCK = 360_001
NO_SUCH_UPLOAD = "No such upload (or it expired, or was used already)."


@dataclass(frozen=True, slots=True)
class NewUpload:
    id: str
    put: PresignedPut
    expires_at: datetime  # attachable until then


@dataclass(frozen=True, slots=True)
class MediaItem:
    """One image a createPost asks for: an upload id and its alt text."""

    upload_id: str
    alt: str | None


@dataclass(slots=True)
class Attached:
    """What an attachment left to do after the commit: the staged objects to delete."""

    staged: list[str] = field(default_factory=list)


def check_sha256(value: str | None) -> str | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    if not _SHA256.fullmatch(lowered):
        raise BadInput("sha256 is the content's SHA-256 as 64 hexadecimal digits.")
    return lowered


async def _check_budget(session: AsyncSession, user_id: int, size: int, settings: Settings) -> None:
    """The user's uploads of the last 24 h, counted under a per-user transaction lock (two
    concurrent createUploads cannot both take the last slot)."""
    await session.execute(
        text("SELECT pg_advisory_xact_lock(:ns, hashint8(:user))"),
        {"ns": _BUDGET_LOCK, "user": user_id},
    )
    window = func.now() - timedelta(seconds=BUDGET_WINDOW_SECONDS)
    count, used, oldest = (
        await session.execute(
            select(
                func.count(),
                func.coalesce(func.sum(Upload.byte_size), 0),
                func.min(Upload.created_at),
            ).where(Upload.user_id == user_id, Upload.created_at > window)
        )
    ).one()
    if (
        count + 1 > settings.media_uploads_per_day
        or used + size > settings.media_upload_bytes_per_day
    ):
        retry = BUDGET_WINDOW_SECONDS
        if oldest is not None:
            age = (datetime.now(UTC) - oldest).total_seconds()
            retry = max(1, int(BUDGET_WINDOW_SECONDS - age))
        raise RateLimited(
            f"At most {settings.media_uploads_per_day} uploads and "
            f"{settings.media_upload_bytes_per_day} bytes a day; try again in {retry} s.",
            retry_after=retry,
        )


async def create_upload(
    session: AsyncSession,
    store: ObjectStore,
    user_id: int,
    content_type: str,
    byte_size: int,
    sha256: str | None,
    settings: Settings,
) -> NewUpload:
    check_content_type(content_type)
    if not 1 <= byte_size <= settings.media_max_bytes:
        raise BadInput(f"An image is 1 to {settings.media_max_bytes} bytes.")
    declared_sha = check_sha256(sha256)
    await _check_budget(session, user_id, byte_size, settings)
    now = datetime.now(UTC)
    upload = Upload(
        id=upload_id(),
        user_id=user_id,
        content_type=content_type,
        byte_size=byte_size,
        sha256=declared_sha,
        staging_key=staging_key(),
        created_at=now,
        expires_at=now + timedelta(seconds=settings.media_upload_ttl_seconds),
        state="pending",
    )
    session.add(upload)
    await session.flush()
    put = await store.presign_put(
        upload.staging_key, content_type, byte_size, settings.media_upload_url_seconds
    )
    return NewUpload(upload.id, put, upload.expires_at)


def check_items(items: Sequence[MediaItem], alt_max_chars: int) -> list[MediaItem]:
    """At most four, no upload twice, alt text cleaned (NFC, no controls) and bounded."""
    if len(items) > MAX_MEDIA_PER_POST:
        raise BadInput(f"A post has at most {MAX_MEDIA_PER_POST} images.")
    if len({item.upload_id for item in items}) != len(items):
        raise BadInput("The same upload is attached twice.")
    checked = []
    for item in items:
        alt = None
        if item.alt is not None:
            alt = clean("alt", item.alt, Kind.BODY).strip() or None
            if alt is not None and len(alt) > alt_max_chars:
                raise BadInput(f"Alt text is at most {alt_max_chars} characters.")
        checked.append(MediaItem(item.upload_id, alt))
    return checked


async def _own_pending(session: AsyncSession, user_id: int, ids: list[str]) -> dict[str, Upload]:
    """The caller's pending, unexpired uploads among `ids`, locked for this transaction."""
    rows = await session.scalars(
        select(Upload)
        .where(
            Upload.id.in_(ids),
            Upload.user_id == user_id,
            Upload.state == "pending",
            Upload.expires_at > func.now(),
        )
        .with_for_update()
    )
    return {row.id: row for row in rows}


async def _store_object(
    session: AsyncSession, store: ObjectStore, upload: Upload, settings: Settings
) -> str:
    """The upload's staged bytes checked, stripped and stored once by content; its key."""
    try:
        data = await store.read(upload.staging_key, min(upload.byte_size, settings.media_max_bytes))
    except ValueError:
        raise BadInput("The uploaded bytes are larger than declared.") from None
    if data is None:
        raise BadInput("Nothing was uploaded yet: PUT the bytes to the upload's URL first.")
    if len(data) != upload.byte_size:
        raise BadInput("The uploaded bytes are not the declared size.")
    if upload.sha256 is not None and hashlib.sha256(data).hexdigest() != upload.sha256:
        raise BadInput("The uploaded bytes do not match the declared sha256.")
    image = check_image(
        data, upload.content_type, settings.media_max_bytes, settings.media_max_pixels
    )
    key = object_key(settings.secret_key, hashlib.sha256(image.data).digest())
    # The row first: its lock (a new row, or an existing one touched) holds the cleanup job
    # off this object until the commit (app.media.cleanup re-checks last_attached_at).
    claim = pg_insert(MediaObject).values(
        key=key,
        content_type=image.content_type,
        width=image.width,
        height=image.height,
        byte_size=len(image.data),
    )
    created = await session.scalar(
        claim.on_conflict_do_update(
            index_elements=[MediaObject.key], set_={"last_attached_at": func.now()}
        ).returning(MediaObject.created_at == MediaObject.last_attached_at)
    )
    if created or not await store.exists(key):
        await store.write(key, image.data, image.content_type)
    return key


async def attach(
    session: AsyncSession,
    store: ObjectStore,
    user_id: int,
    post_id: int,
    items: Sequence[MediaItem],
    settings: Settings,
) -> Attached:
    """The uploads become the post's images, in the caller's transaction."""
    done = Attached()
    if not items:
        return done
    uploads = await _own_pending(session, user_id, [item.upload_id for item in items])
    for position, item in enumerate(items):
        upload = uploads.get(item.upload_id)
        if upload is None:
            raise NotFound(NO_SUCH_UPLOAD)
        key = await _store_object(session, store, upload, settings)
        session.add(PostMedia(post_id=post_id, position=position, media_key=key, alt=item.alt))
        done.staged.append(upload.staging_key)
    await session.execute(
        update(Upload).where(Upload.id.in_(list(uploads))).values(state="attached")
    )
    await session.flush()
    return done


async def drop_staged(store: ObjectStore, keys: Sequence[str]) -> None:
    """After the commit: the staged copies are no longer needed (a failure leaves them to
    the cleanup job)."""
    for key in keys:
        try:
            await store.delete(key)
        except OSError:
            continue
