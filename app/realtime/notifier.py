"""The fan-out service's notifier: what workers publish after they wrote timelines.

Raises are best effort by design: a failed publish is logged and the fan-out job still
succeeds (the timelines are the truth; a missed banner is fixed by the next notification or
reconnect). Withdrawals (a deleted or hidden post) fail their job instead: nothing later would
lower the count again, while the job's retry can.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from redis.exceptions import RedisClusterException, RedisError

from app.config import Settings
from app.db.models import Visibility
from app.realtime import batch_counts, counts, keys
from app.realtime.metrics import PUBLISHED
from app.redis_scripts import AnyRedis
from app.timelines.store import TimelineStore
from app.timelines.tails import Tail

log = logging.getLogger("app.realtime")
# redis-py's cluster errors do not derive from RedisError; neither may fail a fan-out job.
SOFT_ERRORS = (RedisError, RedisClusterException)


def encode_author_post(post_id: int, created_ms: int, visibility: str, published_ms: int) -> str:
    return f"{int(post_id)}:{int(created_ms)}:{visibility}:{int(published_ms)}"


class RedisNotifier:
    """Implements `app.fanout.service.FanoutNotifier` over Redis pub/sub."""

    def __init__(self, redis: AnyRedis, settings: Settings) -> None:
        self.redis = redis
        self.settings = settings
        self.channels = keys.Channels.for_redis(redis, self.settings.realtime_namespace)
        self.online = batch_counts.OnlineUsers()

    def fuses_with(self, store: TimelineStore) -> bool:
        """Can a batch's live counts ride in its timeline write (`count_tail`)?"""
        return store.runs_tails_with(self.redis)

    async def online_guess(self, user_ids: Sequence[int]) -> list[int]:
        """Which of these users are probably online (a copy at most a second old)."""
        online = await self.online.guess(self.redis, self.settings)
        return [u for u in user_ids if u in online] if online else []

    def count_tail(
        self,
        author_id: int,
        entry: Sequence[int],
        user_ids: Sequence[int],
        guessed: Sequence[int],
        *,
        counting: bool,
    ) -> Tail:
        """The live counts of the guessed online users among `user_ids`, as a tail of the
        page's timeline write (decision 0049): it raises with the write, and the job's retry
        repeats both, idempotently. `missed` reads its answer."""
        return batch_counts.count_tail(
            self.redis,
            int(entry[0]),
            int(entry[1]),
            user_ids,
            guessed,
            self.settings,
            author_id=author_id,
            counting=counting,
        )

    def missed(self, tail: Tail, user_ids: Sequence[int]) -> list[int]:
        """The online users a ridden count tail left uncounted."""
        return batch_counts.counted(tail, user_ids)[1]

    async def delivered(
        self, author_id: int, entries: Sequence[Sequence[int]], user_ids: Sequence[int]
    ) -> None:
        """Pushed posts: count them per user and publish one message per user whose count grew
        (one script call per batch; users nobody listens to cost Redis a dict lookup).

        The batch's recipients were read when the post was split, maybe before an unfollow or
        block that came since (queue lag): the script skips users who stopped counting this
        author (`counts.stop_counting`), and posts deleted since (`counts.forget_posts`):
        one ZMSCORE per online recipient, no SQL."""
        try:
            await counts.add_and_publish(
                self.redis, user_ids, entries, self.settings, author_id=author_id
            )
        except SOFT_ERRORS:
            log.warning("live notification for %d users failed", len(user_ids), exc_info=True)

    async def withdrawn(
        self, post_ids: Sequence[int], user_ids: Sequence[int], *, final: bool
    ) -> None:
        """Deleted (`final`) or now PRIVATE posts leave these users' counts; each user whose
        count shrank is told the new one. Not best effort, unlike the raises: an error fails
        the post-change job, whose retry lowers what is left (removing is idempotent), where
        a swallowed one would leave the post counted until the next first page."""
        await counts.forget_posts(self.redis, user_ids, post_ids, self.settings, final=final)

    async def author_posted(
        self, author_id: int, post_id: int, created_ms: int, visibility: str
    ) -> None:
        """Pull-mode post: one message for the author; each API process finds its followers."""
        if visibility == Visibility.PRIVATE:
            return  # never announced to anyone
        message = encode_author_post(post_id, created_ms, visibility, counts.now_ms())
        try:
            # SPUBLISH on a cluster: routed to the channel's shard by its hash tag (0090).
            channel = self.channels.author(author_id)
            await self.redis.execute_command(self.channels.publish_command, channel, message)
        except SOFT_ERRORS:
            log.warning("live notification for author %d failed", author_id, exc_info=True)
            return
        PUBLISHED.labels("author").inc()
