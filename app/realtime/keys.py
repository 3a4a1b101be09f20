"""The realtime keyspace and channels: built here and nowhere else.

- `fu:{<user_id>}` zset of post ids that reached the user since the count was last reset
  (member = post id, score = created_at ms): its ZCARD is `newPostCount`, idempotent under
  replayed fan-out batches because a re-added member changes nothing.
- `fur:{<user_id>}` string: ms of the last reset; pull-mode posts newer than it are "new".
- `fuc:{<user_id>}` zset: author id -> ms, the pairs' stop marks (`counts.stop_counting`);
  `p<post_id>` -> ms, tombstones of deleted posts no raise may count (`counts.forget_posts`).
- channel `fu:<ns>:u:<user_id>`: "count:latest_ms:published_ms" after a user's count changed.
- channel `fu:<ns>:a:<author_id>`: "post_id:created_ms:visibility:published_ms" when a
  pull-mode author posts; only API processes with a connected follower subscribe to it.
- On a Redis Cluster both are shard channels (SPUBLISH/SSUBSCRIBE, decision 0090) with the id
  as a hash tag, `fu:<ns>:u:{<user_id>}` and `fu:<ns>:a:{<author_id>}`: a user's channel is in
  its count keys' slot, so the count scripts SPUBLISH it from the shard they run on. A channel
  ending in `}` is a shard channel (the scripts' `notify` picks SPUBLISH by it).
- channel `fu:<ns>:hub`: keeps a hub's pub/sub connection subscribed while it has no users.
- key `fu:<ns>:online` zset: user id -> last ms a hub held a socket of that user. Fan-out
  keeps counts only for these users; anyone else's count is rebuilt from the timeline when
  they subscribe, so an offline follower costs the fan-out one lookup, not five writes.

Braces are literal Redis Cluster hash tags: a user's keys share a slot. Pub/sub channels,
unlike keys, are shared by every database of a server: `<ns>` (REALTIME_NAMESPACE, by default
the database number) keeps two deployments or test runs on one server apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio.cluster import RedisCluster

from app.redis_scripts import AnyRedis


def count_key(user_id: int) -> str:
    return f"fu:{{{int(user_id)}}}"


def reset_key(user_id: int) -> str:
    return f"fur:{{{int(user_id)}}}"


def stops_key(user_id: int) -> str:
    """Author id -> ms; the user counts only that author's posts created after it (STOPPED:
    none). Absent author: no restriction. Also `p<post_id>` -> ms: a deleted post, never
    counted for the user again."""
    return f"fuc:{{{int(user_id)}}}"


@dataclass(frozen=True)
class Channels:
    """Channel names of one namespace; `sharded` (a cluster): shard channels, the id a hash
    tag."""

    namespace: str
    sharded: bool = False

    @classmethod
    def for_redis(cls, redis: AnyRedis, namespace: str = "") -> Channels:
        cluster = isinstance(redis, RedisCluster)
        if not namespace:
            db = (
                0
                if isinstance(redis, RedisCluster)
                else redis.connection_pool.connection_kwargs.get("db", 0)
            )
            namespace = str(db)
        return cls(namespace, sharded=cluster)

    @property
    def user_prefix(self) -> str:
        """Everything before the user id (the scripts close a shard channel's `{`)."""
        return f"fu:{self.namespace}:u:{'{' if self.sharded else ''}"

    @property
    def author_prefix(self) -> str:
        return f"fu:{self.namespace}:a:{'{' if self.sharded else ''}"

    @property
    def publish_command(self) -> str:
        return "SPUBLISH" if self.sharded else "PUBLISH"

    @staticmethod
    def id_in(channel: bytes | str, prefix_length: int) -> int:
        """The user or author id of a channel whose prefix is `prefix_length` long."""
        tail = channel[prefix_length:]
        return int(tail[:-1] if tail[-1:] in (b"}", "}") else tail)

    @property
    def hub(self) -> str:
        return f"fu:{self.namespace}:hub"

    @property
    def online_key(self) -> str:
        return f"fu:{self.namespace}:online"

    def user(self, user_id: int) -> str:
        return f"{self.user_prefix}{int(user_id)}{'}' if self.sharded else ''}"

    def author(self, author_id: int) -> str:
        return f"{self.author_prefix}{int(author_id)}{'}' if self.sharded else ''}"
