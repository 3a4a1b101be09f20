"""Redis timelines: the only package that knows the `tl:{user}` / `posts:{author}` layout."""

from app.posts.ids import created_ms as created_at_ms
from app.posts.ids import encode_post_id
from app.timelines.store import (
    POST_ID_EPOCH_MS,
    Entry,
    TimelineStore,
    author_posts_key,
    timeline_key,
)

__all__ = [
    "POST_ID_EPOCH_MS",
    "Entry",
    "TimelineStore",
    "author_posts_key",
    "created_at_ms",
    "encode_post_id",
    "timeline_key",
]
