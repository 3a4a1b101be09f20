"""The media parts of createUpload and createPost (app.media.uploads does the work): the
GraphQL inputs to domain items, the upload to its type, the attachment run inside the post's
transaction and its staged copies dropped after the commit."""

from __future__ import annotations

from datetime import UTC, datetime

import strawberry
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.schema.context import Context
from app.api.schema.types import MediaInput, Upload, UploadHeader
from app.db import models
from app.media import uploads


async def create_upload(
    ctx: Context, viewer_id: int, content_type: str, byte_size: int, sha256: str | None
) -> Upload:
    state = ctx.state
    async with ctx.transaction() as session:
        made = await uploads.create_upload(
            session, state.media_store, viewer_id, content_type, byte_size, sha256, state.settings
        )
    return Upload(
        id=strawberry.ID(made.id),
        url=made.put.url,
        headers=[UploadHeader(name=k, value=v) for k, v in made.put.headers.items()],
        expires_at=datetime.fromtimestamp(made.put.expires_at, UTC),
    )


def checked_items(inputs: list[MediaInput], alt_max_chars: int) -> list[uploads.MediaItem]:
    """At most four, each upload once, alt text bounded: BAD_USER_INPUT before any work."""
    items = [uploads.MediaItem(str(m.upload_id), m.alt) for m in inputs]
    return uploads.check_items(items, alt_max_chars)


class Attachment:
    """createPost's images: `run` in the post's transaction (a new post only, never a
    replayed idempotency key), `after_commit` once it committed."""

    def __init__(
        self, ctx: Context, session: AsyncSession, viewer_id: int, items: list[uploads.MediaItem]
    ) -> None:
        self.ctx = ctx
        self.session = session
        self.viewer_id = viewer_id
        self.items = items
        self.done = uploads.Attached()

    async def run(self, post: models.Post) -> None:
        state = self.ctx.state
        self.done = await uploads.attach(
            self.session, state.media_store, self.viewer_id, post.id, self.items, state.settings
        )

    async def after_commit(self) -> None:
        await uploads.drop_staged(self.ctx.state.media_store, self.done.staged)
