"""A first page's reset of the viewer's live "new posts" count (the composition root hands
in the call: app.realtime.counts). A fresh first page shows everything announced so far, so
the count restarts; it is started as soon as the page's candidates are read, so that it runs
while the page is filtered, ranked and read instead of after it: the page shows what the
candidates held, which is what the reset forgets.

The new-post count is not reset on a reused page whose session's first page reset it: the
count holds posts delivered since that reset, and every such post would be a new candidate
(it would have changed the signature). "Count is zero" alone is not enough to skip: the
reset also moves the mark (`fur:{user}`) from which a later subscribe counts the posts that
arrived while the viewer was away, so skipping it on an unchanged zero count would announce
posts this very page showed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

from app.feed.aio import retrieve
from app.feed.page import FIRST_PAGE, FeedPage
from app.feed.sessions import OpenSessions

_RESET_DONE = FIRST_PAGE.labels("reset", "done")
_RESET_SKIPPED = FIRST_PAGE.labels("reset", "skipped")


class CountReset:
    """One first page's reset: started by the stage that read the candidates, finished (or
    skipped) once the page is read."""

    def __init__(self, run: Callable[[int], Awaitable[None]], viewer_id: int) -> None:
        self._run, self._viewer_id = run, viewer_id
        self.task: asyncio.Future[None] | None = None

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.ensure_future(self._run(self._viewer_id))
            self.task.add_done_callback(retrieve)

    async def settle(self) -> bool:
        """Wait for a started reset; True when it was done (False: not started, or Redis
        failed; other failures are raised)."""
        if self.task is None:
            return False
        await asyncio.wait([self.task])
        if self.task.cancelled():
            return False
        error = self.task.exception()
        if error is None:
            return True
        if isinstance(error, RedisError):
            return False
        raise error

    async def abandon(self) -> None:
        """The page failed: wait for a started reset, whatever it comes to."""
        with contextlib.suppress(Exception):
            await self.settle()

    async def finish(self, page: FeedPage, open_sessions: OpenSessions) -> None:
        """The page is read: the live count restarts, unless nothing arrived since the reset
        after this session's own first page. Usually started, and done, by now."""
        viewer_id, session = self._viewer_id, page.session_id
        open_ = open_sessions.get(viewer_id, session) if page.reused else None
        if self.task is None and open_ is not None and open_.reset_done:
            _RESET_SKIPPED.inc()
            return
        self.start()
        if not await self.settle():
            return  # Redis down: the page matters more; the next first page resets
        _RESET_DONE.inc()
        if session is not None:
            open_sessions.reset_done(viewer_id, session)
