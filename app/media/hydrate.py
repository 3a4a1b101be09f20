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

from app.errors import Unavailable
from app.media.urls import MediaUrls

PAGE_MEDIA_SQL = """
SELECT pm.post_id, pm.alt, mo.key, mo.content_type, mo.width, mo.height
FROM post_media pm JOIN media_objects mo ON mo.key = pm.media_key
WHERE pm.post_id = ANY($1::bigint[])
ORDER BY pm.post_id, pm.position
"""

Rows = Callable[..., Awaitable[Sequence[Sequence[Any]]]]

# A post's images never change once it is posted (post_media is written in the post's own
# transaction and never edited; a deleted or narrowed post never reaches hydration: the
# filter decides who sees it), so each process keeps what it read: post id -> its images'
# (alt, key, content type, width, height), () for none. A page of posts seen before costs no
# query, and a page served from a verified window while PostgreSQL is away keeps its images.
# Bounded: emptied when it reaches KNOWN_POSTS.
KNOWN_POSTS = 100_000
_KNOWN: dict[int, tuple[tuple[str | None, str, str, int, int], ...]] = {}


@dataclass(frozen=True, slots=True)
class MediaView:
    """One image of a post as a viewer gets it."""

    url: str
    width: int
    height: int
    content_type: str
    alt: str | None


def forget_local() -> None:
    """Forget the posts' images this process read (AppState.forget_local)."""
    _KNOWN.clear()


async def page_media(
    rows: Rows, urls: MediaUrls, posts: Sequence[tuple[int, str]], degraded: bool = False
) -> dict[int, list[MediaView]]:
    """Per (post id, visibility) of the page: its images in order ([] for none). `rows`:
    how to run PAGE_MEDIA_SQL (Reads.all), for the posts this process has not read yet.
    `degraded`: a page served without PostgreSQL (a verified window); a post whose images
    could not be read then shows none rather than failing the page."""
    visibility = dict(posts)
    found: dict[int, list[MediaView]] = {post_id: [] for post_id in visibility}
    missing = [post_id for post_id in visibility if post_id not in _KNOWN]
    if missing:
        try:
            read = await rows(PAGE_MEDIA_SQL, missing)
        except Unavailable:
            if not degraded:
                raise
        else:
            if len(_KNOWN) + len(missing) > KNOWN_POSTS:
                _KNOWN.clear()
            images: dict[int, list[tuple[str | None, str, str, int, int]]] = {
                post_id: [] for post_id in missing
            }
            for post_id, alt, key, content_type, width, height in read:
                images[post_id].append((alt, key, content_type, width, height))
            _KNOWN.update((post_id, tuple(each)) for post_id, each in images.items())
    url, memo = urls.url, urls.minted
    for post_id, scope in visibility.items():
        for alt, key, content_type, width, height in _KNOWN.get(post_id, ()):
            minted = memo(key, content_type, scope) or await url(key, content_type, scope)
            found[post_id].append(MediaView(minted, width, height, content_type, alt))
    return found
