"""What the fan-out tells live clients, as the interface it needs (implemented by
`app.realtime.notifier.RedisNotifier`, handed down by the composition root): the fan-out
knows no pub/sub, counts or sockets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from app.timelines.store import TimelineStore
from app.timelines.tails import Tail


class FanoutNotifier(Protocol):
    """Tells live clients that posts arrived (Redis pub/sub); implemented in app.realtime."""

    async def delivered(
        self, author_id: int, entries: Sequence[Sequence[int]], user_ids: Sequence[int]
    ) -> None:
        """Posts were pushed into these users' timelines."""

    async def author_posted(
        self, author_id: int, post_id: int, created_ms: int, visibility: str
    ) -> None:
        """A pull-mode author posted: one message per author, not per follower."""

    async def withdrawn(
        self, post_ids: Sequence[int], user_ids: Sequence[int], *, final: bool
    ) -> None:
        """These posts no longer reach these users (deleted when `final`, else made PRIVATE):
        take them out of the users' live counts. Raises on failure, so the job is retried."""


@runtime_checkable
class FusingNotifier(FanoutNotifier, Protocol):
    """A notifier whose counting of a batch page rides in the page's timeline write, as a
    tail (`app.timelines.tails`, decisions 0049 and 0070)."""

    def fuses_with(self, store: TimelineStore) -> bool:
        """Whether its tails can ride in this store's write (one standalone server)."""

    async def online_guess(self, user_ids: Sequence[int]) -> list[int]:
        """The users probably online: their counts are declared in the tail."""

    def count_tail(
        self,
        author_id: int,
        entry: Sequence[int],
        user_ids: Sequence[int],
        guessed: Sequence[int],
        *,
        counting: bool,
    ) -> Tail:
        """The tail counting `entry` for the online ones of `user_ids` (the page's users, in
        the write's order); `counting` off: the online ones are only reported."""

    def missed(self, tail: Tail, user_ids: Sequence[int]) -> list[int]:
        """The online users a ridden count tail did not count (for the caller to count)."""
