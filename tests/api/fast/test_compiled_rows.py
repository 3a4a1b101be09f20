"""Row plans (app.api.fast.compiler's RowPlan, app.api.schema.feed's ROW_READS, decision 0058)
render what the object render gives for the same page, byte for byte, and refuse
(NotCompilable) what it refuses.

The page is one FeedPage, turned into both roots' values by the functions the `feed` field
uses (`_connection`: PostEdge/Post objects over FeedPage.posts; `_rows`: (cursor, FeedRow,
reason, why) tuples; some edges OWN, some RECOMMENDED with or without their why); documents
are the registered Feed document and random plannable ones
(tests/api/fast/test_compiled_documents.py's generator). Over HTTP and against graphql-core,
test_compiled_documents.py compares the whole path (a compiled request takes the row plan).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from app.api.fast.codegen import _generate
from app.api.fast.plan import NotCompilable
from app.api.schema import feed
from app.api.schema.feed import ROW_READS
from app.db.models import FANOUT_PULL
from app.feed.cursor import CursorCodec, SessionPosition
from app.feed.page import FeedPage
from app.feed.recommended import Why
from app.feed.rows import FeedAuthor, FeedRow, PageExtras
from app.media.hydrate import MediaView
from tests.api.fast.differential import Gen, compile_text, feed_with_media, gql_text

CODEC = CursorCodec("row-plan-test-secret")
VIEWER = 1003  # one of the pages' authors: some edges are OWN


@dataclass
class UsersRow:
    """What the user_by_id loader puts in a page's extras (a users row's attributes)."""

    id: int
    handle: str
    display_name: str
    follower_count: int
    following_count: int
    fanout_mode: int


def _page(rng: random.Random, posts: int) -> FeedPage:
    extras = PageExtras()
    rows = []
    for n in range(posts):
        author = 1000 + rng.randrange(6)
        if rng.random() < 0.2:
            extras.authors[author] = UsersRow(author, f"u{author}", "Ünï", 0, 2, FANOUT_PULL)
        else:
            mode = rng.choice((0, FANOUT_PULL))
            extras.authors[author] = FeedAuthor(author, f"user{author}", f"U {n}", 9, 4, mode)
        post_id = 1_577_000_000_000_000_000 + rng.randrange(10**12)
        edited = datetime(2026, 12, 2, 1, n % 60, tzinfo=UTC) if rng.random() < 0.3 else None
        row = FeedRow(
            post_id,
            author,
            rng.randrange(10**6),
            rng.randrange(10**4),
            rng.randrange(1, 5),
            rng.choice(("public", "followers", "private")),
            datetime(2026, 12, 1, 12, n % 60, rng.randrange(60), rng.randrange(10**6), UTC),
            edited,
            rng.choice(("a post", "", 'émoji 🎉 "quoted" \\ \n line', "x" * 300)),
        )
        if rng.random() < 0.4:
            extras.liked.add(post_id)
        extras.covered.add(post_id)
        extras.media[post_id] = [_media_view(rng) for _ in range(rng.choice((0, 0, 1, 2, 4)))]
        rows.append((row, SessionPosition("s1", n + 1)))
    session = rng.choice(("s1", None))
    page = FeedPage(rows, rng.random() < 0.5, session, rng.random() < 0.2, extras=extras)
    if rng.random() < 0.7:  # some edges RECOMMENDED, most with their why, some without
        page.recommended = frozenset(r.post_id for r, _ in rows if rng.random() < 0.4)
        for post_id in page.recommended:
            if rng.random() < 0.8:
                likers = [
                    FeedAuthor(2000 + i, f"fan{i}", f"Fan {i}", i, 2 * i, rng.choice((0, 1)))
                    for i in range(rng.randrange(4))
                ]
                page.why[post_id] = Why(len(likers) + rng.randrange(3), likers)
    return page


def _media_view(rng: random.Random) -> MediaView:
    content_type = rng.choice(("image/png", "image/jpeg", "image/webp", "image/gif"))
    url = f"/media/m-{rng.randrange(16**8):08x}?e={rng.randrange(10**10)}&s=x%2By"
    alt = rng.choice((None, "", "a square", 'ünï "alt" \\ 🎉 \n'))
    return MediaView(url, rng.randrange(1, 9000), rng.randrange(1, 9000), content_type, alt)


def _both(plan: Any, page: FeedPage, has_previous: bool) -> tuple[Any, Any]:
    """(object render, row render) of one page, or NotCompilable for either."""
    assert plan.rows is not None
    answers = []
    for build, render in ((feed._connection, plan.render), (feed._rows, plan.rows.render)):
        value = build(page, CODEC, "fp", has_previous, VIEWER)
        try:
            answers.append(orjson.dumps(render(value, value.extras)))
        except NotCompilable:
            answers.append(NotCompilable)
    return answers[0], answers[1]


def test_the_registered_feed_document_has_a_row_plan() -> None:
    # A field added to the Feed document without a row read would quietly leave the
    # registered document on the (slower) object render: this fails instead.
    for name in ("Feed", "FeedWithReasons"):
        plan = compile_text(gql_text(name))
        assert plan is not None and plan.rows is not None, name
    plan = compile_text(feed_with_media())  # Post.media: the page's media from its extras
    assert plan is not None and plan.rows is not None


def test_row_plans_render_the_object_renders_bytes() -> None:
    rng = random.Random(58)
    plans = [compile_text(gql_text("Feed")), compile_text(gql_text("FeedWithReasons"))]
    plans.append(compile_text(feed_with_media()))
    for _ in range(80):
        text, _ = Gen(rng, []).document()
        plans.append(compile_text(text))
    compared = 0
    for plan in plans:
        assert plan is not None and plan.rows is not None
        for posts in (0, 1, 20):
            page = _page(rng, posts)
            objects, rows = _both(plan, page, rng.random() < 0.5)
            assert rows == objects
            compared += objects is not NotCompilable
    assert compared == 3 * len(plans)
    assert sum(b'"media":[{' in _both(p, _page(rng, 20), False)[0] for p in plans) > 20


@pytest.mark.parametrize("document", ["Feed", "FeedWithReasons", "media"])
def test_what_the_object_render_refuses_the_row_render_refuses(document: str) -> None:
    plan = compile_text(feed_with_media() if document == "media" else gql_text(document))
    rng = random.Random(7)
    cases = []
    if document == "media":
        page = _page(rng, 3)
        page.extras.media.clear()  # media the page did not read
        cases.append(page)
        page = _page(rng, 3)
        row = page.rows[0][0]
        page.extras.media[row.post_id] = [MediaView("/m", 1, 2**31, "image/png", None)]
        cases.append(page)  # past Int's 32 bits
    page = _page(rng, 3)
    page.extras.authors.clear()  # an author the page lacks
    cases.append(page)
    page = _page(rng, 3)
    page.extras.covered.clear()  # likes the page did not read
    cases.append(page)
    page = _page(rng, 3)
    row, position = page.rows[1]
    page.rows[1] = (row._replace(likes=2**31), position)  # past Int's 32 bits
    cases.append(page)
    page = _page(rng, 3)
    row, position = page.rows[0]
    page.rows[0] = (row._replace(body=None), position)  # null in a non-null field
    cases.append(page)
    for page in cases:
        assert _both(plan, page, True) == (NotCompilable, NotCompilable)
    page = _page(rng, 3)
    row, position = page.rows[0]
    page.rows[0] = (row._replace(visibility="secret"), position)  # not a Visibility
    for build, render in ((feed._connection, plan.render), (feed._rows, plan.rows.render)):
        with pytest.raises(ValueError):
            value = build(page, CODEC, "fp", True, VIEWER)
            render(value, value.extras)


def test_a_field_without_a_row_read_renders_from_objects() -> None:
    plan = compile_text(gql_text("Feed"))
    reads = {t: dict(fields) for t, fields in ROW_READS.items()}
    del reads["User"]["handle"]
    with pytest.raises(NotCompilable):
        _generate(plan.steps, reads)
    text = "query { feed { edges { node { id } } } }"
    assert compile_text(text).rows is not None
