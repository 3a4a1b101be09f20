"""One probe round: every edge of the ring (a follower and the canary it follows) runs one
change, the edges at once; the change of edge k in round n is KINDS[(k + n) % 4], so four
canaries cover every kind every round. Before the edges start, every canary reads its first
page (it marks the canary active; see `_warm`).

An edge's step:
1. the author posts twice (a steady post and the change's target), each acknowledged;
2. the follower reads its CHRONOLOGICAL first page until both show (its `feedUpdates`
   socket announcing new posts wakes it early; otherwise every POLL_SECONDS): the time from
   the acknowledgement is `feed_probe_post_visible_seconds`; a post that no read SENT past
   the freshness budget showed is LOST;
3. the follower opens a RANKED and a CHRONOLOGICAL scroll (their first pages);
4. the change, acknowledged: the author deletes the target or makes it PRIVATE, or the
   follower blocks or unfollows the author (app.probe.ledger: from whom it hides what);
5. reads sent after it: the open scrolls go on (next pages: a RANKED session frozen before
   the change re-checks every post), fresh scrolls in both modes, and the author's own;
6. the ring is restored (unblock and follow again, or follow again).
Every page of every read goes through the ledger (leaks) and its scroll (duplicates: a post a
scroll already served)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app.probe.client import Api, GraphQLFailure, ProbeError
from app.probe.constants import MAX_PAGES, POLL_SECONDS, VISIBLE_FIRST, WARM_SECONDS
from app.probe.ledger import Ledger
from app.probe.metrics import KINDS
from app.probe.ring import Canary, Ring

log = logging.getLogger("app.probe")

RANKED, CHRONOLOGICAL = "RANKED", "CHRONOLOGICAL"


@dataclass
class Tally:
    """What a round found."""

    leaks: Counter[str] = field(default_factory=Counter)
    lost: int = 0
    duplicates: int = 0
    visible: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pages: int = 0

    @property
    def ok(self) -> bool:
        return not (self.leaks or self.lost or self.duplicates or self.errors)

    def summary(self) -> dict[str, Any]:
        return {
            "result": "ok" if self.ok else "failed",
            "leaks": {kind: self.leaks[kind] for kind in KINDS},
            "lost": self.lost,
            "duplicates": self.duplicates,
            "visible_seconds": sorted(round(v, 3) for v in self.visible),
            "pages": self.pages,
            "errors": self.errors,
        }


@dataclass(frozen=True)
class Page:
    posts: list[tuple[str, str]]  # (post id, author id), as served
    end_cursor: str | None
    has_next: bool
    degraded: bool
    sent: float
    received: float


@dataclass(frozen=True)
class Posted:
    post_id: str
    acked: float


class Round:
    def __init__(
        self,
        api: Api,
        ring: Ring,
        ledger: Ledger,
        number: int,
        freshness_seconds: float,
        page_size: int,
    ) -> None:
        self.api = api
        self.ring = ring
        self.ledger = ledger
        self.number = number
        self.freshness = freshness_seconds
        self.page_size = page_size
        self.tally = Tally()

    async def run(self) -> Tally:
        try:
            if self.ring.needs_repair:  # a block or unfollow a cut-short round left is undone
                self.ledger.lift_all()
            await self.ring.ready()
            canaries = self.ring.canaries
            await asyncio.gather(*(self._warm(c) for c in canaries))
        except ProbeError as exc:
            self._failed(exc)
            return self.tally
        edges = [self._edge(k) for k in range(len(canaries))]
        for outcome in await asyncio.gather(*edges, return_exceptions=True):
            if isinstance(outcome, ProbeError):
                self._failed(outcome)
            elif isinstance(outcome, BaseException):
                log.error("round %d: unexpected %r", self.number, outcome, exc_info=outcome)
                self._failed(outcome)
        return self.tally

    async def _warm(self, canary: Canary) -> None:
        """A first page marks the canary active (fan-out writes only active users'
        timelines). A degraded one (its timeline missing: rebuilt meanwhile, the page read
        from PostgreSQL) is read again for up to WARM_SECONDS, so the round's posts are seen
        through fan-out, not through a fallback that would hide a lost batch."""
        deadline = time.monotonic() + WARM_SECONDS
        while (await self.read(canary, CHRONOLOGICAL, self.page_size)).degraded:
            if time.monotonic() > deadline:
                log.info("round %d: @%s's feed is still degraded", self.number, canary.handle)
                return
            await asyncio.sleep(POLL_SECONDS)

    def _failed(self, exc: BaseException) -> None:
        self.tally.errors.append(str(exc) or repr(exc))
        self.ring.needs_repair = True
        if isinstance(exc, GraphQLFailure) and exc.code == "UNAUTHENTICATED":
            self.ring.forget_tokens()

    # -- an edge --------------------------------------------------------------------------

    async def _edge(self, k: int) -> None:
        follower, author = self.ring.canaries[k], self.ring.followee(k)
        kind = KINDS[(k + self.number) % len(KINDS)]
        steady = await self._post(author, f"probe round {self.number}: steady")
        target = await self._post(author, f"probe round {self.number}: to be {kind}")
        await self._until_visible(follower, [steady, target])
        ranked = Scroll(self, follower, RANKED)
        chrono = Scroll(self, follower, CHRONOLOGICAL)
        await ranked.page()
        await chrono.page()
        await self._change(kind, follower, author, target)
        await ranked.rest()
        await chrono.rest()
        await Scroll(self, follower, RANKED).rest()
        await Scroll(self, follower, CHRONOLOGICAL).rest()
        await Scroll(self, author, CHRONOLOGICAL).rest()
        await self._restore(kind, follower, author)

    async def _post(self, author: Canary, body: str) -> Posted:
        # FOLLOWERS: only the ring sees a canary's posts (decision 0065); the leak rule is the
        # same (a hidden post is one its follower may no longer see).
        variables = {
            "body": body,
            "visibility": "FOLLOWERS",
            "idempotencyKey": uuid.uuid4().hex,
        }
        answer = await self.api.call("CreatePost", variables, author.token)
        return Posted(answer.data["createPost"]["id"], answer.received)

    async def _until_visible(self, follower: Canary, posts: list[Posted]) -> None:
        """Read until each post shows, or a read sent past its budget did not show it."""
        waiting = {p.post_id: p.acked for p in posts}
        updates = follower.updates
        while waiting:
            if updates is not None:
                updates.arrived.clear()
            page = await self.read(follower, CHRONOLOGICAL, VISIBLE_FIRST)
            shown = {post_id for post_id, _ in page.posts}
            for post_id, acked in list(waiting.items()):
                if post_id in shown:
                    self.tally.visible.append(page.received - acked)
                    del waiting[post_id]
                elif page.sent >= acked + self.freshness:
                    log.warning("round %d: post %s never reached @%s's feed within %.1f s",
                                self.number, post_id, follower.handle, self.freshness)  # fmt: skip
                    self.tally.lost += 1
                    del waiting[post_id]
            if waiting:
                due = min(waiting.values()) + self.freshness - time.monotonic()
                pause = max(0.0, min(POLL_SECONDS, due))
                if updates is not None and not updates.closed:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(updates.arrived.wait(), pause)
                else:
                    await asyncio.sleep(pause)

    async def _change(self, kind: str, follower: Canary, author: Canary, target: Posted) -> None:
        if kind == "deleted":
            try:
                answer = await self.api.call("DeletePost", {"id": target.post_id}, author.token)
                acked = answer.received
            except GraphQLFailure as failure:  # a retried delete: the first one went through
                if failure.code != "NOT_FOUND":
                    raise
                acked = time.monotonic()
            self.ledger.hide_post(kind, target.post_id, author.user_id, acked)
        elif kind == "private":
            variables = {"id": target.post_id, "visibility": "PRIVATE"}
            answer = await self.api.call("SetPostVisibility", variables, author.token)
            self.ledger.hide_post(kind, target.post_id, author.user_id, answer.received)
        elif kind == "blocked":
            answer = await self.api.call("Block", {"handle": author.handle}, follower.token)
            self.ledger.hide_author(kind, follower.user_id, author.user_id, answer.received)
            self.ledger.hide_author(kind, author.user_id, follower.user_id, answer.received)
        else:
            answer = await self.api.call("Unfollow", {"handle": author.handle}, follower.token)
            self.ledger.hide_author(kind, follower.user_id, author.user_id, answer.received)

    async def _restore(self, kind: str, follower: Canary, author: Canary) -> None:
        if kind == "blocked":
            self.ledger.lift(follower.user_id, author.user_id)
            self.ledger.lift(author.user_id, follower.user_id)
            await self.api.call("Unblock", {"handle": author.handle}, follower.token)
        if kind in ("blocked", "unfollowed"):
            self.ledger.lift(follower.user_id, author.user_id)
            await self.api.call("Follow", {"handle": author.handle}, follower.token)

    # -- reads ----------------------------------------------------------------------------

    async def read(self, viewer: Canary, mode: str, first: int, after: str | None = None) -> Page:
        """One feed page, checked against the ledger."""
        variables = {"first": first, "after": after, "mode": mode}
        answer = await self.api.call("Feed", variables, viewer.token)
        feed = answer.data["feed"]
        posts = [(e["node"]["id"], e["node"]["author"]["id"]) for e in feed["edges"]]
        self.tally.pages += 1
        for kind in self.ledger.leaks(viewer.user_id, answer.sent, posts, feed["degraded"]):
            log.error("round %d: LEAK (%s) on @%s's %s page: %s", self.number, kind,
                      viewer.handle, mode, posts)  # fmt: skip
            self.tally.leaks[kind] += 1
        info = feed["pageInfo"]
        return Page(
            posts,
            info["endCursor"],
            info["hasNextPage"],
            feed["degraded"],
            answer.sent,
            answer.received,
        )


class Scroll:
    """A first page and the next pages its cursors lead to: one feed session as a client
    scrolls it. A post it serves twice is a duplicate."""

    def __init__(self, round_: Round, viewer: Canary, mode: str) -> None:
        self.round = round_
        self.viewer = viewer
        self.mode = mode
        self.seen: set[str] = set()
        self.after: str | None = None
        self.more = True
        self.pages = 0

    async def page(self) -> None:
        found = await self.round.read(self.viewer, self.mode, self.round.page_size, self.after)
        self.pages += 1
        ids = [post_id for post_id, _ in found.posts]
        repeated = [post_id for post_id in ids if post_id in self.seen]
        if repeated:
            log.error("round %d: DUPLICATE on @%s's %s page %d: %s", self.round.number,
                      self.viewer.handle, self.mode, self.pages, repeated)  # fmt: skip
            self.round.tally.duplicates += len(repeated)
        self.seen.update(ids)
        self.after = found.end_cursor
        self.more = found.has_next and found.end_cursor is not None

    async def rest(self) -> None:
        """The first page if not read yet, then next pages while there are more (MAX_PAGES)."""
        if self.pages == 0:
            await self.page()
        while self.more and self.pages < MAX_PAGES:
            await self.page()
