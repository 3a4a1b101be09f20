"""A first page's Redis reads of the viewer's slot, sent as one pipeline.

When the timelines and the sessions share a client (one REDIS_URL, the default), a first
page sends the context's token (`fcv:`), the timeline's newest entries and, for RANKED, the
open session renewed (GETEX) in case the candidates match it, or else the viewer's
impressions: one round trip. Three round trips were ~10% of a heavy RANKED first page's API
samples (py-spy: the socket writes alone), one is left. Each stage then reads its own reply.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError

from app.feed.context_cache import version_key
from app.feed.deadline import SourceDeadline
from app.feed.impressions import ImpressionLog
from app.feed.sessions import FeedSessionStore, OpenSessions
from app.timelines.store import TimelineStore

# Where each reply is in `FirstReads.replies`: the impressions take the session's place when
# no open session is read.
TOKEN, TIMELINE, SESSION = 0, 1, 2
SEEN = SESSION


class FirstReads:
    """The replies of a first page's pipeline.

    `error`: the pipeline failed as a whole (timeout, connection); each reader then takes
    its own failure path, as if its own command had failed."""

    __slots__ = ("error", "replies", "seen", "session_id")

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.replies: list[Any] = []
        self.session_id: str | None = None  # the open session read along, if any
        self.seen: int | None = None  # where the viewer's impressions' reply is, if read

    def reply(self, index: int) -> Any:
        """A command's reply as the pipeline left it (a failed command: its error)."""
        if self.error is not None:
            raise self.error
        return self.replies[index]

    def token(self) -> bytes | None:
        """The context's token as read (b"" when none is set); None: it could not be read."""
        try:
            token = self.reply(TOKEN)
        except (RedisError, TimeoutError, OSError):
            return None
        return None if isinstance(token, Exception) else bytes(token or b"")


class FirstReadsPipeline:
    """Sends a first page's reads as one pipeline (`possible` when the timelines and the
    sessions share one Redis client)."""

    def __init__(
        self,
        store: TimelineStore,
        feed_sessions: FeedSessionStore,
        open_sessions: OpenSessions,
        impressions: ImpressionLog,
        deadline: SourceDeadline,
    ) -> None:
        self.store = store
        self.feed_sessions = feed_sessions
        self.open_sessions = open_sessions
        self.impressions = impressions
        self.deadline = deadline
        self.possible = store.redis is feed_sessions.redis

    async def read_first(self, viewer_id: int, limit: int, ranked: bool) -> FirstReads:
        """The context token, the timeline's newest `limit` entries and (RANKED, when the
        viewer has an open session here) that session renewed."""
        reads = FirstReads()
        pipe = self.feed_sessions.redis.pipeline(transaction=False)
        pipe.execute_command("GET", version_key(viewer_id))
        pipe.execute_command(*self.store.latest_ids_command(viewer_id, limit))
        open_ = self.open_sessions.peek(viewer_id) if ranked else None
        if open_ is not None:
            # Renewed before the candidates say whether it is reused: a session that is
            # not reused only lives on for its TTL, as the sessions past the cap do.
            reads.session_id = open_.session_id
            pipe.execute_command(*self.feed_sessions.renew_command(viewer_id, open_.session_id))
        elif ranked and self.impressions.enabled:
            # No session to reuse: this page ranks, and ranking reads the impressions.
            reads.seen = SEEN
            pipe.execute_command(*self.impressions.seen_command(viewer_id))
        try:
            reads.replies = await self.deadline.within(pipe.execute(raise_on_error=False))
        except (RedisError, TimeoutError, OSError) as exc:
            reads.error = exc
        return reads
