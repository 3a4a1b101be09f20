"""A page's media: one query for every post of the page (post_id = ANY, in position order,
through post_media's primary key), URLs minted for the viewer (app.media.urls). Called only
with posts the visibility rule already let the viewer see."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ARRAY, BigInteger, any_, cast, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MediaObject, PostMedia
from app.media.urls import MediaUrls


@dataclass(frozen=True, slots=True)
class MediaView:
    """One image of a post as a viewer gets it."""

    url: str
    width: int
    height: int
    content_type: str
    alt: str | None


async def page_media(
    session: AsyncSession, urls: MediaUrls, posts: Sequence[tuple[int, str]]
) -> dict[int, list[MediaView]]:
    """Per (post id, visibility) of the page: its images in order ([] for none)."""
    visibility = dict(posts)
    found: dict[int, list[MediaView]] = {post_id: [] for post_id in visibility}
    if not visibility:
        return found
    rows = await session.execute(
        select(
            PostMedia.post_id,
            PostMedia.alt,
            MediaObject.key,
            MediaObject.content_type,
            MediaObject.width,
            MediaObject.height,
        )
        .join(MediaObject, MediaObject.key == PostMedia.media_key)
        .where(PostMedia.post_id == any_(cast(list(visibility), ARRAY(BigInteger))))
        .order_by(PostMedia.post_id, PostMedia.position)
    )
    for post_id, alt, key, content_type, width, height in rows:
        url = await urls.url(key, content_type, visibility[post_id])
        found[post_id].append(MediaView(url, width, height, content_type, alt))
    return found
