"""The realtime keyspace and channels: built here and nowhere else.

- `fu:{<user_id>}` zset of post ids that reached the user since the count was last reset
  (member = post id, score = created_at ms): its ZCARD is `newPostCount`, idempotent under
  replayed fan-out batches because a re-added member changes nothing.
- `fur:{<user_id>}` string: ms of the last reset; pull-mode posts newer than it are "new".
- channel `fu:u:<user_id>`: "count:latest_ms:published_ms" after a user's count changed.
- channel `fu:a:<author_id>`: "post_id:created_ms:visibility:published_ms" when a pull-mode
  author posts; only API processes with a connected follower subscribe to it.
- channel `fu:hub`: keeps the hub's pub/sub connection subscribed while it has no users.

Braces are literal Redis Cluster hash tags: a user's two keys share a slot.
"""

from __future__ import annotations

HUB_CHANNEL = "fu:hub"
USER_PREFIX = "fu:u:"
AUTHOR_PREFIX = "fu:a:"


def count_key(user_id: int) -> str:
    return f"fu:{{{int(user_id)}}}"


def reset_key(user_id: int) -> str:
    return f"fur:{{{int(user_id)}}}"


def user_channel(user_id: int) -> str:
    return f"{USER_PREFIX}{int(user_id)}"


def author_channel(author_id: int) -> str:
    return f"{AUTHOR_PREFIX}{int(author_id)}"
