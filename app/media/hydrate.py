"""A page's media: one query for every post of the page (post_id = ANY, in position order,
through post_media's primary key), URLs minted for the viewer (app.media.urls). Called only
with posts the visibility rule already let the viewer see.

The query is driver SQL run by the caller's `all(statement, *args)` (app.feed.reads.Reads,
the read path's way: no ORM session, no statement compilation, plain records), since a page
with images reads up to 80 rows here and every response selecting Post.media runs it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.media.urls import MediaUrls

PAGE_MEDIA_SQL = """
SELECT pm.post_id, pm.alt, mo.key, mo.content_type, mo.width, mo.height
FROM post_media pm JOIN media_objects mo ON mo.key = pm.media_key
WHERE pm.post_id = ANY($1::bigint[])
ORDER BY pm.post_id, pm.position
"""

Rows = Callable[..., Awaitable[Sequence[Sequence[Any]]]]


@dataclass(frozen=True, slots=True)
class MediaView:
    """One image of a post as a viewer gets it."""

    url: str
    width: int
    height: int
    content_type: str
    alt: str | None


async def page_media(
    rows: Rows, urls: MediaUrls, posts: Sequence[tuple[int, str]]
) -> dict[int, list[MediaView]]:
    """Per (post id, visibility) of the page: its images in order ([] for none). `rows`:
    how to run PAGE_MEDIA_SQL (Reads.all)."""
    visibility = dict(posts)
    found: dict[int, list[MediaView]] = {post_id: [] for post_id in visibility}
    if not visibility:
        return found
    url, memo = urls.url, urls.minted
    for post_id, alt, key, content_type, width, height in await rows(
        PAGE_MEDIA_SQL, list(visibility)
    ):
        scope = visibility[post_id]
        minted = memo(key, content_type, scope) or await url(key, content_type, scope)
        found[post_id].append(MediaView(minted, width, height, content_type, alt))
    return found
