"""The leak rule: what the canaries have hidden from whom, since when, and which posts of a
served page break it.

A post is a LEAK on a page when the change that hides it from that viewer was acknowledged
(its mutation answered) before the page's request was SENT: a read already in flight when the
change commits may still show the post (that is the grace for requests in flight, and all of
it). The changes and whom they hide a post from (docs/API.md, "The feed": each applies to
the very next page):
- deleted: everyone, its author too;
- private: everyone but its author;
- blocked: the blocked author's posts from the blocker, and the blocker's from the blocked;
- unfollowed: the author's posts from the former follower.
A page marked `degraded: true` may show what a check up to FEED_AUTHZ_TTL_SECONDS old allowed
(a PostgreSQL outage, decision 0019); such a page counts only past DEGRADED_GRACE_SECONDS.

A relation's entry is lifted *before* the probe sends the mutation that restores it (unblock,
follow), so a read answered after that is never counted: the probe never claims a leak the
contract allows. Hidden posts stay hidden for good; the newest KEEP_POSTS are remembered (a
canary reads a few pages from the top, where older ones never are)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from app.probe.constants import DEGRADED_GRACE_SECONDS, KEEP_POSTS


@dataclass(frozen=True)
class Hide:
    kind: str  # deleted | private | blocked | unfollowed
    acked: float  # time.monotonic() when the change's mutation was answered
    author_id: str


class Ledger:
    def __init__(self) -> None:
        self._posts: OrderedDict[str, Hide] = OrderedDict()
        self._relations: dict[tuple[str, str], Hide] = {}

    def hide_post(self, kind: str, post_id: str, author_id: str, acked: float) -> None:
        """`kind` deleted (from everyone) or private (from everyone but the author)."""
        self._posts[post_id] = Hide(kind, acked, author_id)
        while len(self._posts) > KEEP_POSTS:
            self._posts.popitem(last=False)

    def hide_author(self, kind: str, viewer_id: str, author_id: str, acked: float) -> None:
        """Every post of `author_id` is hidden from `viewer_id` (blocked, unfollowed)."""
        self._relations[(viewer_id, author_id)] = Hide(kind, acked, author_id)

    def lift(self, viewer_id: str, author_id: str) -> None:
        """The relation is about to be restored: its posts are no longer the probe's claim."""
        self._relations.pop((viewer_id, author_id), None)

    def lift_all(self) -> None:
        """The ring is about to be repaired after a round cut short: no relation is claimed."""
        self._relations.clear()

    def leaks(
        self,
        viewer_id: str,
        sent: float,
        posts: Iterable[tuple[str, str]],
        degraded: bool = False,
    ) -> list[str]:
        """The kind of every (post id, author id) served to `viewer_id` on a page whose request
        was sent at `sent` (monotonic) that the rule says was hidden from them by then."""
        found = []
        for post_id, author_id in posts:
            hide = self._hiding(viewer_id, post_id, author_id)
            if hide is None or hide.acked >= sent:
                continue
            if degraded and sent - hide.acked < DEGRADED_GRACE_SECONDS:
                continue
            found.append(hide.kind)
        return found

    def _hiding(self, viewer_id: str, post_id: str, author_id: str) -> Hide | None:
        hide = self._posts.get(post_id)
        if hide is not None and (hide.kind == "deleted" or viewer_id != hide.author_id):
            return hide
        return self._relations.get((viewer_id, author_id))
