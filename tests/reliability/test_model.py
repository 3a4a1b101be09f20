"""Model-based randomized test of the home feed (issue 11): hypothesis stateful testing.

Five users (one of them, `cel`, has ten passive fans, so its posts go the PULL way) follow,
unfollow, block, unblock, post (bursts too), delete, change visibility and read their feeds
through GraphQL in random order; the real write path runs (`pipeline.settle()`) at random
points. A reference model (follows, blocks, posts and their visibility) checks every page:

- no leak: every post shown is one the viewer may see now (app.posts.visibility's home-feed
  rule: alive; the viewer's own, or a current followee's non-PRIVATE post, no block);
- no duplicate within a feed session (RANKED: its pages; CHRONOLOGICAL: a keyset walk, whose
  ids must also strictly decrease);
- completeness once settled: a full scroll holds every alive post of the viewer (all of them,
  however many) and, of each current followee, the visible ones among its newest
  PULL_PER_AUTHOR posts (what a fresh follow or a PULL author is read from) and every visible
  post it made while the follow already existed (fanned out into the viewer's timeline, also
  when made PUBLIC or FOLLOWERS only after its fan-out ran). `age` checks push the follows and
  mode switches an hour back first, so that only the timeline (not the recent-follow pull)
  can supply followees' posts. Settled also means the read path's in-process cache of PULL authors'
  indexes (2 s) has expired: a check scrolls again until SETTLE_SECONDS (`late_checks`).

Negative feedback (issue 35, decision 0076): users hide (or "show fewer" of) others' posts,
unhide them, mute and unmute authors at random points, also between the pages of an open
session; the model's rule leaves a hidden post and a muted author's posts out of the feed, so
no page may show one after the change (inside open sessions too), and completeness brings
them back once unhidden or unmuted.

Recommendations (issue 35, decision 0079): users like posts (one of the liker's followers
reads RANKED at once), so followees' likes propose candidates; every page is read with
`FeedWithReasons` and each edge is checked by its reason: RECOMMENDED only in RANKED and only
a post the recommendation rule allows now (alive, PUBLIC, not the viewer's, author not
followed, no block either way, not hidden, author not muted; liked by a user the viewer
follows or followed: the source's list is cached RECOMMENDED_CACHE_SECONDS), its likers
current, unblocked, unmuted followees who liked it; OWN the viewer's, FOLLOWED the home-feed
rule's. A block or a narrowing (delete, PUBLIC -> FOLLOWERS/PRIVATE) is read at once: the next
page of an open RANKED session (re-judged mid-scroll), else a first page. A recommendation
may show late or never (cache, ranking, share cap): nothing asserts that one must show;
`test_a_followees_like_surfaces_a_recommendation_in_the_models_setting` shows one does.

Image posts (issue 36, decision 0080): some posts carry 1-2 images (createUpload, the PUT,
createPost with `media`, as a client does); every page is read with Post.media selected (the
compiled path answers it), and each post shown carries exactly its images. Every media URL a
viewer receives is on a post the viewer may see now (the checks above), scoped by the post's
visibility now (`cc=public` only for a PUBLIC post), expiring within the URL lifetime
(MEDIA_PRIVATE_URL_SECONDS, two MEDIA_PUBLIC_URL_SECONDS windows; IMAGE_URL_SECONDS here);
fetched once per viewer and post, it returns the image. A URL whose post the viewer may no
longer see (a narrowing, a block, a delete) is fetched again once it expired: refused, so
access ends within the URL lifetime (`media_urls_expire`; `revoke_media` takes a post whose
images another user holds away from them, by a delete, PRIVATE or a block, and waits for
their URLs to expire in a few examples per run).

Regional policy (issue 37 part 3, decision 0088): each user is served in a region ("local"
or "eu", an app of its own over the same state, as two API processes of two regions would
be), and may move to the other between steps; an operator restricts posts in a region and
lifts restrictions at random points (app.posts.restrictions, what `python -m app.moderation`
runs). The model's rule: a post restricted in the viewer's region is shown to nobody there
but its author (feeds, recommendations, the by-id rule that likes and hides go through);
readers mid-scroll read on at once after a restriction, as after a narrowing.

The fan-out control plane (issue 21) switches modes under all this: a rule posts a burst from
one author (the cost model takes it PULL within a WINDOW_SECONDS posting window), a rule pins
or unpins an author (`python -m app.fanout pin`), a rule runs the periodic pass (which brings a
burst's author back to PUSH and queues its pull-era posts); splits and batches may be left
queued across a switch. Every check above holds whatever the modes are (read from the API).

Rules run on a worker thread; each one hands its coroutine to the test's event loop, where the
app, its pools and the ARQ workers live. `MODEL_EXAMPLES` (default 20) and `MODEL_STEPS`
(default 50) size the run: `MODEL_EXAMPLES=200 make test ARGS=tests/reliability/test_model.py`
is the long one (figures in docs/RELIABILITY.md).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)

from app.config import get_settings
from app.fanout import lanes
from app.fanout.__main__ import pin as pin_author
from app.feed.constants import PULL_PER_AUTHOR
from app.operation_documents import operations
from app.posts.restrictions import change_restriction
from benchmarks.media_pages import with_media
from jobs.worker import REVIEW
from tests.helpers import (
    app_client,
    fanout_mode,
    follow,
    full_scroll,
    gql,
    make_user,
    post,
    quick_users,
    reset_stores,
    sql,
)
from tests.media.images import image_bytes
from tests.media.steps import create_post, upload

T = TypeVar("T")
EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "20"))
STEPS = int(os.environ.get("MODEL_STEPS", "50"))
HANDLES = ("ann", "bob", "cat", "dan", "cel")  # cel: the PULL-mode author
START_FOLLOWS = ((0, 4), (1, 4), (2, 0), (3, 1))  # ann, bob follow cel; cat ann; dan bob
FANS = 10  # = FANOUT_PULL_THRESHOLD in tests/conftest.py
VISIBILITIES = ("PUBLIC", "FOLLOWERS", "PRIVATE")
GRAPH_ACTIONS = ("follow", "follow", "unfollow", "block", "unblock")
SETTLE_SECONDS = 10.0  # beyond the write path: the read path's 2 s author-index cache
MAX_PAGES = 40  # a full scroll of page size 25: far more than any example posts
WINDOW_SECONDS = 3  # the control plane's posting-rate window here (the default: 600)
RECOMMENDED_CACHE_SECONDS = 0.25  # FEED_RECOMMENDED_CACHE_SECONDS here (tests: 60)
IMAGE_URL_SECONDS = 1  # MEDIA_PRIVATE_URL_SECONDS and MEDIA_PUBLIC_URL_SECONDS here
PNG = b"\x89PNG\r\n\x1a\n"
MEDIA_WAITS = 4  # examples per run that wait for a revoked media URL to expire

# Every page: FeedWithReasons with Post.media (a text until the demo's PostFields selects it).
FEED_READ = with_media(operations()["FeedWithReasons"])

REGIONS = ("local", "eu")  # the serving regions of the model's two apps
START_REGIONS = ("local", "eu", "local", "eu", "local")

users = st.integers(0, len(HANDLES) - 1)
modes = st.sampled_from(("RANKED", "CHRONOLOGICAL"))


@dataclass
class Post:
    id: int
    author: int
    visibility: str
    step: int  # when it was made
    deleted: bool = False
    images: int = 0
    restricted: set[str] = field(default_factory=set)  # regions (decision 0088)


@dataclass
class Minted:
    """A media URL a viewer received: for which post, until when (its `exp`)."""

    viewer: int
    post: int
    expires: int
    checked: bool = False  # fetched again after it expired


@dataclass
class Session:
    mode: str
    cursor: str | None
    has_next: bool
    seen: set[int] = field(default_factory=set)
    last: int | None = None  # CHRONOLOGICAL: the smallest id shown so far


@dataclass
class Figures:
    examples: int = 0
    steps: int = 0
    pages: int = 0
    posts_checked: int = 0
    complete_checks: int = 0
    expected_posts: int = 0
    pull_followees: int = 0  # followees in PULL mode met by completeness checks
    late_checks: int = 0  # full scrolls repeated while the in-process caches expired
    bursts: int = 0
    pins: int = 0
    reviews: int = 0  # periodic passes run (jobs.worker.REVIEW)
    switches: int = 0  # mode switches those passes made
    hides: int = 0  # posts hidden (hidePost, showFewerLikeThis) or unhidden
    mutes: int = 0  # mutes and unmutes
    likes: int = 0  # likes made (each one a recommendation candidate for the liker's fans)
    recommended: int = 0  # RECOMMENDED edges checked
    rejudged: int = 0  # pages read in an open session at once after a block or a narrowing
    image_posts: int = 0
    media_shown: int = 0  # media items checked on pages
    media_fetched: int = 0  # URLs fetched (200 and the image)
    expired_refused: int = 0  # expired URLs fetched again (refused)
    revoked_refused: int = 0  # of those, URLs of posts their viewer may no longer see
    media_waits: int = 0  # examples that waited for such a URL to expire
    restrictions: int = 0  # restricts and unrestricts (decision 0088)
    moves: int = 0  # users moved to the other region


FIGURES = Figures()


class FeedModel(RuleBasedStateMachine):
    """The world as a model, and the rules that change it through the API."""

    loop: ClassVar[asyncio.AbstractEventLoop]
    client: ClassVar[httpx.AsyncClient]
    clients: ClassVar[dict[str, httpx.AsyncClient]]  # region -> an app serving it
    state: ClassVar[Any]
    pipeline: ClassVar[Any]

    def __init__(self) -> None:
        super().__init__()
        self.step = 0
        self.tokens: list[str] = []
        self.region: list[str] = list(START_REGIONS)  # where each user is served
        self.ids: list[int] = []
        self.follows: dict[tuple[int, int], int] = {}  # (follower, followee) -> since step
        self.aged: set[tuple[int, int]] = set()  # follows made to look an hour old
        self.blocks: set[tuple[int, int]] = set()
        self.posts: dict[int, Post] = {}
        self.hidden: set[tuple[int, int]] = set()  # (viewer, post id)
        self.mutes: set[tuple[int, int]] = set()  # (muter, muted)
        self.likes: set[tuple[int, int]] = set()  # (liker, post id)
        self.ever_followed: set[tuple[int, int]] = set()  # the source's cache may lag
        self.sessions: dict[int, Session] = {}
        self.minted: dict[str, Minted] = {}  # media URL -> who received it first, for what
        self.fetched: set[tuple[int, int]] = set()  # (viewer, post): an image of it fetched
        self.object_post: dict[str, int] = {}  # media object key -> its post
        self.images_made = 0
        self.waited = False  # media_urls_expire waited for a URL's expiry in this example
        FIGURES.examples += 1

    # -- plumbing --------------------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    def call(self, user: int, operation: str, variables: dict[str, Any]) -> Any:
        self.step += 1
        FIGURES.steps += 1
        client = self.clients[self.region[user]]
        return self.run(gql(client, operation, variables, token=self.tokens[user]))

    def blocked(self, a: int, b: int) -> bool:
        return (a, b) in self.blocks or (b, a) in self.blocks

    def may_see(self, viewer: int, post: Post) -> bool:
        """The home-feed rule (app.posts.visibility.home_feed_sql), on the model."""
        if post.deleted:
            return False
        if post.author == viewer:
            return True
        return (
            post.visibility != "PRIVATE"
            and self.region[viewer] not in post.restricted
            and (viewer, post.author) in self.follows
            and not self.blocked(viewer, post.author)
            and (viewer, post.id) not in self.hidden
            and (viewer, post.author) not in self.mutes
        )

    def visible_by_id(self, viewer: int, post: Post) -> bool:
        """The by-id rule (visible_sql): what a viewer may hide or unhide."""
        if post.deleted:
            return False
        if post.author == viewer:
            return True
        if self.blocked(viewer, post.author) or post.visibility == "PRIVATE":
            return False
        if self.region[viewer] in post.restricted:
            return False
        return post.visibility == "PUBLIC" or (viewer, post.author) in self.follows

    def may_recommend(self, viewer: int, post: Post) -> bool:
        """The recommendation rule (recommended_sql), on the model: alive, PUBLIC, by another
        user the viewer does not follow, no block either way, neither hidden nor muted; and
        liked by a user the viewer follows or followed (the source's ids are cached briefly,
        so a since-dropped follow may still have brought it)."""
        return (
            not post.deleted
            and post.visibility == "PUBLIC"
            and self.region[viewer] not in post.restricted
            and post.author != viewer
            and (viewer, post.author) not in self.follows
            and not self.blocked(viewer, post.author)
            and (viewer, post.id) not in self.hidden
            and (viewer, post.author) not in self.mutes
            and any(
                (viewer, liker) in self.ever_followed
                for liker, liked in self.likes
                if liked == post.id
            )
        )

    def drop_follow(self, a: int, b: int) -> None:
        self.follows.pop((a, b), None)
        self.aged.discard((a, b))

    def pick(self, author: int, index: int) -> Post | None:
        mine = sorted(p.id for p in self.posts.values() if p.author == author and not p.deleted)
        return self.posts[mine[index % len(mine)]] if mine else None

    # -- setup -----------------------------------------------------------------------------

    @initialize()
    def world(self) -> None:
        async def make() -> list[tuple[str, int]]:
            await reset_stores(self.state)
            made = await quick_users(self.state, [*HANDLES, *(f"fan{i}" for i in range(FANS))])
            for token, _ in made[len(HANDLES) :]:
                (await gql(self.client, "Follow", {"handle": "cel"}, token=token)).ok()
            return made[: len(HANDLES)]

        made = self.run(make())
        self.tokens = [t for t, _ in made]
        self.ids = [i for _, i in made]
        for a, b in START_FOLLOWS:  # a start the rules may undo: the PULL author is followed
            self.graph(a, b, "follow")
        for a in range(len(HANDLES)):  # something to like (and to recommend, or not) at once
            self.post(a, "PUBLIC", 1)
            self.post(a, "FOLLOWERS", 1)

    # -- the graph -------------------------------------------------------------------------

    @rule(a=users, b=users, action=st.sampled_from(GRAPH_ACTIONS))
    def graph(self, a: int, b: int, action: str) -> None:
        """follow (twice as likely as the others), unfollow, block or unblock."""
        if a == b:
            return
        result = self.call(a, action.capitalize(), {"handle": HANDLES[b]})
        if action == "follow" and self.blocked(a, b):
            assert result.codes == ["FORBIDDEN"], result.errors
            return
        result.ok()
        if action == "follow":
            self.follows.setdefault((a, b), self.step)
            self.ever_followed.add((a, b))
        elif action == "unfollow":
            self.drop_follow(a, b)
        elif action == "block":
            self.blocks.add((a, b))
            self.drop_follow(a, b)
            self.drop_follow(b, a)
            self.rejudge(a)
            self.rejudge(b)
        else:
            self.blocks.discard((a, b))

    # -- negative feedback (decision 0076) ------------------------------------------------

    @rule(
        a=users,
        b=users,
        index=st.integers(0, 1000),
        op=st.sampled_from(("HidePost", "HidePost", "ShowFewerLikeThis", "UnhidePost")),
        in_feed=st.booleans(),
    )
    def feedback(self, a: int, b: int, index: int, op: str, in_feed: bool) -> None:
        """`a` hides (or asks fewer of, or unhides) a post of `b`'s; `in_feed`: one the
        feed may show `a` now, when there is one (else a hide rarely changes a page)."""
        target = self.pick(b, index)
        if in_feed:
            if op == "UnhidePost":
                pool = sorted(post for viewer, post in self.hidden if viewer == a)
            else:
                pool = sorted(
                    p.id for p in self.posts.values() if p.author != a and self.may_see(a, p)
                )
            if pool:
                target = self.posts[pool[index % len(pool)]]
        if target is None:
            return
        b = target.author
        FIGURES.hides += 1
        key = "postId" if op == "ShowFewerLikeThis" else "id"
        result = self.call(a, op, {key: str(target.id)})
        if op == "UnhidePost":
            if (a, target.id) in self.hidden or self.visible_by_id(a, target):
                result.ok()
                self.hidden.discard((a, target.id))
            else:
                assert result.codes == ["NOT_FOUND"], result
            return
        if not self.visible_by_id(a, target):
            assert result.codes == ["NOT_FOUND"], result
        elif a == b:
            assert result.codes == ["BAD_USER_INPUT"], result
        else:
            result.ok()
            self.hidden.add((a, target.id))
            self.read_after_change(a)

    @rule(a=users, b=users, undo=st.booleans(), followee=st.booleans())
    def mute(self, a: int, b: int, undo: bool, followee: bool) -> None:
        """`a` mutes (or unmutes) `b`: follows and blocks stay as they are; `followee`: one
        `a` follows (or, to undo, mutes) when there is one."""
        pool = sorted(y for x, y in (self.mutes if undo else self.follows) if x == a)
        if followee and pool:
            b = pool[b % len(pool)]
        FIGURES.mutes += 1
        result = self.call(a, "UnmuteAuthor" if undo else "MuteAuthor", {"handle": HANDLES[b]})
        if a == b:
            assert result.codes == ["BAD_USER_INPUT"], result
            return
        user = result.ok()["unmuteAuthor" if undo else "muteAuthor"]
        assert user["viewerMutes"] is not undo
        if undo:
            self.mutes.discard((a, b))
        else:
            self.mutes.add((a, b))
            self.read_after_change(a)

    def rejudge(self, viewer: int) -> None:
        """A page after a block or a narrowing is judged anew: the next page of the viewer's
        open RANKED session (mid-scroll), else a fresh RANKED first page."""
        session = self.sessions.get(viewer)
        if session is not None and session.mode == "RANKED" and session.has_next:
            FIGURES.rejudged += 1
            self.page(viewer, session, 10)
        else:
            self.open_feed(viewer, "RANKED", 10)

    def read_after_change(self, viewer: int) -> None:
        """The viewer reads on at once: the open session's next page (a hide or mute must
        hold inside it), else a first page."""
        session = self.sessions.get(viewer)
        if session is not None and session.has_next:
            self.page(viewer, session, 10)
        else:
            self.open_feed(viewer, "RANKED" if self.step % 2 else "CHRONOLOGICAL", 10)

    # -- likes: recommendation candidates (issue 35, decision 0079) -----------------------

    @rule(
        a=users,
        b=users,
        index=st.integers(0, 1000),
        candidate=st.sampled_from((True, True, False)),
    )
    def like(self, a: int, b: int, index: int, candidate: bool) -> None:
        """`a` likes a post of `b`'s (`candidate`: a post `a` may open by someone other than
        a follower of `a`'s, when there is one): a candidate for everyone who follows `a`,
        one the rule must keep away from those who follow, block or are blocked by its
        author, and from all of them unless PUBLIC."""
        target = self.pick(b, index)
        if candidate:
            fans = [v for v, x in self.follows if x == a]
            pool = sorted(
                p.id
                for p in self.posts.values()
                if p.author != a and self.visible_by_id(a, p) and any(p.author != v for v in fans)
            )
            if pool:
                target = self.posts[pool[index % len(pool)]]
        if target is None or (a, target.id) in self.likes:
            return
        result = self.call(a, "LikePost", {"id": str(target.id)})
        if not self.visible_by_id(a, target):
            assert result.codes == ["NOT_FOUND"], result
            return
        result.ok()
        FIGURES.likes += 1
        self.likes.add((a, target.id))
        fans = sorted(v for v, x in self.follows if x == a)
        if fans:  # one of them opens RANKED at once (a fresh list, or one cached a moment ago)
            self.open_feed(fans[b % len(fans)], "RANKED", 25)

    # -- posts -----------------------------------------------------------------------------

    @rule(a=users, visibility=st.sampled_from(VISIBILITIES), n=st.sampled_from((1, 1, 3, 25)))
    def post(self, a: int, visibility: str, n: int) -> None:
        """One post, or a burst (25: past the 20 own posts the feed once stopped at)."""
        for i in range(n):
            data = self.call(
                a, "CreatePost", {"body": f"{HANDLES[a]} {i}", "visibility": visibility}
            ).ok()
            post_id = int(data["createPost"]["id"])
            self.posts[post_id] = Post(post_id, a, visibility, self.step)

    @rule(a=users, visibility=st.sampled_from(VISIBILITIES), images=st.integers(1, 2))
    def image_post(self, a: int, visibility: str, images: int) -> None:
        """A post with 1-2 images, uploaded as a client does (each image's bytes its own)."""

        async def make() -> int:
            media = []
            for _ in range(images):
                self.images_made += 1
                n = self.images_made
                data = image_bytes("PNG", (8, 6), (n % 256, n // 256 % 256, 40 * a), gps=False)
                uploaded = await upload(self.client, self.tokens[a], data)
                media.append({"uploadId": uploaded, "alt": f"image {n}"})
            made = await create_post(self.client, self.tokens[a], media, "", visibility)
            return int(made.ok()["createPost"]["id"])

        self.step += 1
        FIGURES.steps += 1
        FIGURES.image_posts += 1
        post_id = self.run(make())
        self.posts[post_id] = Post(post_id, a, visibility, self.step, images=images)
        # The author reads at once (own posts show without the write path), and so does a
        # follower, who may get it when the write path already ran for it (or earlier ones).
        self.open_feed(a, "CHRONOLOGICAL", 10)
        fans = sorted(v for v, x in self.follows if x == a)
        if fans:
            self.open_feed(fans[post_id % len(fans)], "RANKED", 10)

    @rule(
        a=users,
        b=users,
        index=st.integers(0, 1000),
        change=st.sampled_from(("delete", *VISIBILITIES)),
    )
    def change(self, a: int, b: int, index: int, change: str) -> None:
        """`a` deletes or changes the visibility of a post of `b`'s: refused unless a == b."""
        target = self.pick(b, index)
        if target is None:
            return
        if change == "delete":
            result = self.call(a, "DeletePost", {"id": str(target.id)})
        else:
            variables = {"id": str(target.id), "visibility": change}
            result = self.call(a, "SetPostVisibility", variables)
        if a != b:
            assert result.codes and result.codes[0] in ("FORBIDDEN", "NOT_FOUND"), result
            return
        if result.codes == ["RATE_LIMITED"]:
            # A widening past FANOUT_WIDENINGS_PER_POST_PER_HOUR (decision 0067): refused,
            # nothing changed; only ever a widening from PRIVATE.
            assert target.visibility == "PRIVATE" and change != "PRIVATE", result
            return
        result.ok()
        narrowed = change == "delete" or (target.visibility, change) in (
            ("PUBLIC", "FOLLOWERS"),
            ("PUBLIC", "PRIVATE"),
            ("FOLLOWERS", "PRIVATE"),
        )
        if change == "delete":
            target.deleted = True
        else:
            target.visibility = change
        if narrowed:  # someone mid-scroll reads on (the first open RANKED session's owner)
            for viewer in range(len(HANDLES)):
                session = self.sessions.get(viewer)
                if viewer != a and session and session.mode == "RANKED" and session.has_next:
                    self.rejudge(viewer)
                    break

    # -- regional policy (decision 0088) ---------------------------------------------------

    @rule(
        b=users,
        index=st.integers(0, 1000),
        region=st.sampled_from(REGIONS),
        lift=st.sampled_from((False, False, True)),
    )
    def restrict(self, b: int, index: int, region: str, lift: bool) -> None:
        """An operator restricts a post of `b`'s in `region` (or lifts a restriction there);
        someone served there mid-scroll reads on at once, as after a narrowing."""
        target = self.pick(b, index)
        if lift:
            pool = sorted(p.id for p in self.posts.values() if region in p.restricted)
            target = self.posts[pool[index % len(pool)]] if pool else None
        if target is None:
            return
        FIGURES.restrictions += 1
        self.step += 1
        change = change_restriction(
            self.state.sessions, target.id, [region], "model", "model", lift=lift
        )
        self.run(change)
        if lift:
            target.restricted.discard(region)
            return
        target.restricted.add(region)
        for viewer in range(len(HANDLES)):
            session = self.sessions.get(viewer)
            if self.region[viewer] == region and session and session.has_next:
                self.rejudge(viewer)
                break

    @rule(a=users)
    def move(self, a: int) -> None:
        """`a` is served in the other region from now on (an open session goes on there)."""
        FIGURES.moves += 1
        self.region[a] = REGIONS[1 - REGIONS.index(self.region[a])]
        session = self.sessions.get(a)
        if session is not None and session.has_next:
            self.page(a, session, 10)

    # -- the control plane (issue 21) -----------------------------------------------------

    @rule(a=users, n=st.sampled_from((8, 15)), split=st.booleans(), review=st.booleans())
    def burst(self, a: int, n: int, split: bool, review: bool) -> None:
        """A burst from one author: past what the cost model pushes within the (short)
        window, so its later posts go PULL; `split`: their splits run now, their batches
        (and a switch's) may still wait when the next rule runs."""
        FIGURES.bursts += 1
        self.post(a, "PUBLIC", n)
        if split:
            self.run(self.pipeline.relay.drain())
            self.run(self.pipeline.run_lane(lanes.DEFAULT))
        if review:  # an earlier burst's window may be over by now
            self.review()

    @rule(a=users, choice=st.sampled_from(("push", "pull", "auto")), review=st.booleans())
    def pin(self, a: int, choice: str, review: bool) -> None:
        """The operator pins an author (`python -m app.fanout pin`), or lets the model decide
        again; it takes effect at the author's next post or the next periodic pass."""
        FIGURES.pins += 1
        assert self.run(pin_author(self.state.sessions, self.state.redis, HANDLES[a], choice)) == 0
        if review:
            self.review()

    def review(self) -> None:
        """The periodic pass (a cron on the default lane) runs: modes may switch, and a switch
        back to PUSH queues the pull-era posts' batches (left queued: the big lane's too)."""
        FIGURES.reviews += 1

        async def run() -> int:
            job = await self.pipeline.arq.enqueue_job(REVIEW, _queue_name=lanes.DEFAULT)
            await self.pipeline.run_lane(lanes.DEFAULT)
            return int(await job.result(timeout=30))

        FIGURES.switches += self.run(run())

    # -- reads -----------------------------------------------------------------------------

    def page(self, viewer: int, session: Session, first: int) -> None:
        variables: dict[str, Any] = {"first": first, "mode": session.mode}
        if session.cursor is not None:
            variables["after"] = session.cursor
        self.step += 1
        FIGURES.steps += 1
        client = self.clients[self.region[viewer]]
        found = self.run(gql(client, "", variables, self.tokens[viewer], FEED_READ))
        feed = found.ok()["feed"]
        FIGURES.pages += 1
        for edge in feed["edges"]:
            node = edge["node"]
            post_id = int(node["id"])
            post = self.posts.get(post_id)
            assert post is not None, f"unknown post {post_id} in the feed of {HANDLES[viewer]}"
            self.check_reason(viewer, session, post, edge)
            self.check_media(viewer, post, node["media"])
            assert int(node["author"]["id"]) == self.ids[post.author]
            assert node["visibility"] == post.visibility, (node, post)
            assert post_id not in session.seen, f"duplicate {post_id} in a session"
            if session.mode == "CHRONOLOGICAL":
                assert session.last is None or post_id < session.last, "out of order"
                session.last = post_id
            session.seen.add(post_id)
            FIGURES.posts_checked += 1
        session.cursor = feed["pageInfo"]["endCursor"]
        session.has_next = feed["pageInfo"]["hasNextPage"]
        if session.has_next:
            assert session.cursor, "hasNextPage without an endCursor"

    def check_media(self, viewer: int, post: Post, media: list[dict[str, Any]]) -> None:
        """A post the viewer may see (check_reason) carries its own images, URLs scoped
        by its visibility now and living at most the URL lifetime; one of them is fetched
        (once per viewer and post): the image."""
        assert len(media) == post.images, (post, media)
        now = time.time()
        for item in media:
            url = item["url"]
            parts = urlsplit(url)
            query = parse_qs(parts.query)
            key = parts.path.rsplit("/", 1)[-1]
            assert self.object_post.setdefault(key, post.id) == post.id, (url, post)
            scope = "public" if post.visibility == "PUBLIC" else "private"
            assert query["cc"] == [scope], (url, post)
            expires = int(query["exp"][0])
            lifetime = IMAGE_URL_SECONDS * (2 if scope == "public" else 1)
            assert now - 1 <= expires <= now + lifetime + 1, (url, now)
            assert item["contentType"] == "image/png" and item["width"] == 8, item
            self.minted.setdefault(url, Minted(viewer, post.id, expires))
            FIGURES.media_shown += 1
        if media and (viewer, post.id) not in self.fetched:
            self.fetched.add((viewer, post.id))
            response = self.run(self.client.get(media[0]["url"]))
            assert response.status_code == 200 and response.content.startswith(PNG), response
            FIGURES.media_fetched += 1

    def still_shown(self, minted: Minted) -> bool:
        """Whether the viewer may still get the URL's post (in the feed, or recommended)."""
        post = self.posts[minted.post]
        return self.may_see(minted.viewer, post) or self.may_recommend(minted.viewer, post)

    @rule()
    def media_urls_expire(self) -> None:
        """URLs received earlier and expired by now are refused: first those of posts their
        viewer may no longer see (access ends within the URL lifetime), at most four."""
        self.refuse_expired(wait=False)

    def refuse_expired(self, wait: bool) -> None:
        """`wait`: until the earliest URL of a post its viewer may no longer see has expired
        (a lifetime or two: a second or two), in at most MEDIA_WAITS examples of a run (the
        run's time); otherwise such URLs are checked when they expired on their own."""
        now = time.time()
        if wait and not self.waited and FIGURES.media_waits < MEDIA_WAITS:
            revoked = [m.expires for m in self.minted.values() if not self.still_shown(m)]
            if revoked and min(revoked) >= now - 0.5:
                self.waited = True
                FIGURES.media_waits += 1
                time.sleep(max(0.0, min(revoked) + 0.6 - now))
                now = time.time()
        due = [(u, m) for u, m in self.minted.items() if not m.checked and m.expires < now - 0.5]
        due.sort(key=lambda item: self.still_shown(item[1]))
        for url, minted in due[:4]:
            minted.checked = True
            response = self.run(self.client.get(url))
            assert response.status_code == 403, (url, response.status_code)
            FIGURES.expired_refused += 1
            FIGURES.revoked_refused += not self.still_shown(minted)

    @rule(index=st.integers(0, 1000), how=st.sampled_from(("delete", "PRIVATE", "block")))
    def revoke_media(self, index: int, how: str) -> None:
        """A post whose images another user received is taken from them (deleted, made
        PRIVATE, or its author blocks them): no page shows it to them any more (`page`), and
        the URLs they hold stop working within the URL lifetime (`refuse_expired`)."""
        held = sorted(
            {(m.viewer, m.post) for m in self.minted.values()
             if m.viewer != self.posts[m.post].author and self.still_shown(m)}
        )  # fmt: skip
        if not held:
            return
        viewer, post_id = held[index % len(held)]
        author = self.posts[post_id].author
        if how == "block":
            self.graph(author, viewer, "block")
        else:
            mine = sorted(p.id for p in self.posts.values() if p.author == author and not p.deleted)
            self.change(author, author, mine.index(post_id), how)
        self.refuse_expired(wait=True)

    def check_reason(self, viewer: int, session: Session, post: Post, edge: dict) -> None:
        """The edge's reason against the model: a recommendation only in RANKED and only one
        the rule allows now (its likers: current followees who liked it); else the home
        feed's rule (OWN: the viewer's, FOLLOWED: a followee's)."""
        who = HANDLES[viewer]
        reason = edge["reason"]
        if reason == "RECOMMENDED":
            assert session.mode == "RANKED", f"a recommendation in CHRONOLOGICAL: {post}"
            assert self.may_recommend(viewer, post), f"recommended leak: {post} to {who}"
            why = edge["recommendation"]
            for liker in (self.ids.index(int(u["id"])) for u in why["likedBy"]):
                assert (viewer, liker) in self.follows, (who, liker, why)
                assert (liker, post.id) in self.likes, (who, liker, why)
                assert not self.blocked(viewer, liker) and (viewer, liker) not in self.mutes
            FIGURES.recommended += 1
            return
        assert edge["recommendation"] is None, edge
        assert self.may_see(viewer, post), f"leak: {post} to {who} ({reason})"
        assert reason == ("OWN" if post.author == viewer else "FOLLOWED"), (reason, post, who)

    @rule(viewer=users, mode=modes, first=st.sampled_from((3, 10, 20)))
    def open_feed(self, viewer: int, mode: str, first: int) -> None:
        session = self.sessions[viewer] = Session(mode, None, True)
        self.page(viewer, session, first)

    @rule(viewer=users, first=st.sampled_from((3, 10, 20)), pages=st.integers(1, 3))
    def scroll(self, viewer: int, first: int, pages: int) -> None:
        """Further pages of the viewer's open session, with writes done since in between."""
        session = self.sessions.get(viewer)
        for _ in range(pages):
            if session is None or not session.has_next:
                return
            self.page(viewer, session, first)

    @rule(viewer=users, mode=modes, age=st.booleans(), review=st.booleans())
    def settle_and_check(self, viewer: int, mode: str, age: bool, review: bool) -> None:
        """The write path settles; a full scroll holds everything it must (module doc)."""
        if review:
            self.review()
        self.run(self.pipeline.settle())
        if age:
            self.run(_age_follows())
            self.aged.update(self.follows)
        expected = self.expected(viewer)
        FIGURES.complete_checks += 1
        FIGURES.expected_posts += len(expected)
        # Settled includes the read path's in-process author-index cache (2 s): a PULL
        # author's new post may take that long to show (and to end an open session's reuse).
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            session = self.sessions[viewer] = Session(mode, None, True)
            for _ in range(MAX_PAGES):
                self.page(viewer, session, 25)
                if not session.has_next:
                    break
            missing = expected - session.seen
            if not missing or time.monotonic() > deadline:
                break
            FIGURES.late_checks += 1
            time.sleep(0.25)
        assert not missing, f"{HANDLES[viewer]}'s {mode} feed misses " + ", ".join(
            str(self.posts[m]) for m in sorted(missing)
        )

    def expected(self, viewer: int) -> set[int]:
        """What a settled full scroll must hold (module doc)."""
        must = {p.id for p in self.posts.values() if p.author == viewer and not p.deleted}
        for (follower, author), since in self.follows.items():
            if follower != viewer:
                continue
            theirs = sorted(p.id for p in self.posts.values() if p.author == author)
            pull = self.mode_of(author) == "PULL"
            FIGURES.pull_followees += pull
            if pull or (follower, author) not in self.aged:  # read from posts:{author}
                must.update(
                    p for p in theirs[-PULL_PER_AUTHOR:] if self.may_see(viewer, self.posts[p])
                )
            if not pull:  # fanned out into the viewer's timeline when made
                for p in map(self.posts.__getitem__, theirs):
                    if p.step > since and self.may_see(viewer, p):
                        must.add(p.id)
        return must

    def mode_of(self, author: int) -> str:
        return self.run(fanout_mode(self.client, HANDLES[author]))


async def _age_follows() -> None:
    """Follows and mode switches an hour old: past the read path's recent-follow pull."""
    await sql("UPDATE follows SET created_at = created_at - interval '1 hour'")
    await sql(
        "UPDATE users SET fanout_mode_changed_at = fanout_mode_changed_at - interval '1 hour'"
        " WHERE fanout_mode_changed_at IS NOT NULL"
    )


async def test_feed_matches_the_model(client, state, pipeline, monkeypatch) -> None:
    # A short posting-rate window (the workers share this process's settings): a burst is
    # over within an example, and the periodic pass switches its author back.
    monkeypatch.setattr(get_settings(), "fanout_window_seconds", WINDOW_SECONDS)
    # The control plane decides (tests/conftest.py runs the rest with the thresholds); no
    # small-author floor: FANS followers.
    monkeypatch.setattr(get_settings(), "fanout_control", "cost")
    monkeypatch.setattr(get_settings(), "fanout_pull_min_active_followers", 0)
    # Recommendations kept per viewer briefly (tests: 60 s), so that a like made within
    # an example may surface in it, and a cached list may still outlive a change.
    monkeypatch.setattr(state.feed.recommendations.cache, "ttl", RECOMMENDED_CACHE_SECONDS)
    # Media URLs short-lived, so that the ones of posts made invisible expire within an example.
    monkeypatch.setattr(get_settings(), "media_private_url_seconds", IMAGE_URL_SECONDS)
    monkeypatch.setattr(get_settings(), "media_public_url_seconds", IMAGE_URL_SECONDS)
    FeedModel.loop = asyncio.get_running_loop()
    FeedModel.client, FeedModel.state, FeedModel.pipeline = client, state, pipeline
    async with app_client(state, region="eu") as eu:  # the second region's app (decision 0088)
        FeedModel.clients = {"local": client, "eu": eu}
        await _run_model()


async def _run_model() -> None:
    run_settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        print_blob=True,
    )
    await asyncio.to_thread(run_state_machine_as_test, FeedModel, settings=run_settings)
    print(f"\nmodel: {FIGURES}")


async def test_every_own_post_is_in_the_home_feed_however_far_one_scrolls(client) -> None:
    """The gap the model found: own posts were candidates for the newest 20 only. Past
    OWN_PER_READ (100) and FEED_SESSION_SIZE (120 in tests), in both modes, with a followee's
    posts interleaved and some own posts deleted or PRIVATE."""
    token, _ = await make_user(client, "poster")
    friend_token, _ = await make_user(client, "friend")
    await follow(client, token, "friend")
    mine, theirs = [], []
    for i in range(130):
        mine.append(await post(client, token, f"mine {i}", "PRIVATE" if i % 7 == 0 else "PUBLIC"))
        if i % 10 == 0:
            theirs.append(await post(client, friend_token, f"theirs {i}"))
    for gone in mine[5:40:9]:
        assert (await gql(client, "DeletePost", {"id": str(gone)}, token=token)).ok()
    alive = set(mine) - set(mine[5:40:9])
    for mode in ("RANKED", "CHRONOLOGICAL"):
        for first in (20, 100):  # candidate limits of 50 and 210: below and above OWN_PER_READ
            shown = await full_scroll(client, token, mode, first)
            assert len(shown) == len(set(shown)), "duplicates"
            assert set(shown) == alive | set(theirs), (mode, first)


async def _reasons(client, token: str) -> dict[int, str]:
    """A full RANKED scroll: each post's reason."""
    found: dict[int, str] = {}
    after = None
    for _ in range(MAX_PAGES):
        variables = {"first": 25, "mode": "RANKED", "after": after}
        feed = (await gql(client, "FeedWithReasons", variables, token=token)).ok()["feed"]
        found.update((int(e["node"]["id"]), e["reason"]) for e in feed["edges"])
        if not feed["pageInfo"]["hasNextPage"]:
            return found
        after = feed["pageInfo"]["endCursor"]
    raise AssertionError("the scroll did not end")


async def test_a_followees_like_surfaces_a_recommendation_in_the_models_setting(
    client, state, pipeline, monkeypatch
) -> None:
    """The model's recommendation checks are not vacuous: with its cache seconds, a like by
    a followee made after the viewer's feed cached none surfaces as RECOMMENDED once they
    pass; then a hide, and (unhidden) a mute of its author, keep it out."""
    monkeypatch.setattr(state.feed.recommendations.cache, "ttl", RECOMMENDED_CACHE_SECONDS)
    (viewer, _), (friend, _), (stranger, _) = await quick_users(
        state, ["viewer", "friend", "stranger"]
    )
    await follow(client, viewer, "friend")
    own = await post(client, viewer, "mine")
    theirs = await post(client, stranger, "theirs")
    await pipeline.settle()
    assert await _reasons(client, viewer) == {own: "OWN"}  # caches no recommendation
    assert (await gql(client, "LikePost", {"id": str(theirs)}, token=friend)).ok()
    assert (await _reasons(client, viewer)).get(theirs) is None  # cached: not yet
    await asyncio.sleep(RECOMMENDED_CACHE_SECONDS + 0.1)
    assert await _reasons(client, viewer) == {own: "OWN", theirs: "RECOMMENDED"}
    assert (await gql(client, "HidePost", {"id": str(theirs)}, token=viewer)).ok()
    assert await _reasons(client, viewer) == {own: "OWN"}
    assert (await gql(client, "UnhidePost", {"id": str(theirs)}, token=viewer)).ok()
    await asyncio.sleep(RECOMMENDED_CACHE_SECONDS + 0.1)  # a list cached while it was hidden
    assert theirs in await _reasons(client, viewer)
    assert (await gql(client, "MuteAuthor", {"handle": "stranger"}, token=viewer)).ok()
    assert await _reasons(client, viewer) == {own: "OWN"}
