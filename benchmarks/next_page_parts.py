"""The Python-only parts of a registered next page that decisions 0056 and 0058 changed, in
process: µs of CPU per 20-post page for each, from whichever tree it runs in (run it from
each tree with the same venv, alternating, and compare).

    python -m benchmarks.next_page_parts [--pages 20000] [--rounds 5] [--earlier 400]

Parts: `cursors` (20 session-position cursors signed, as feed_connection does), `posts`
(20 Post objects over FeedPost rows), `served` (app.feed.page.already_served of a page
at session position --earlier), `page` (decision 0058: a FeedService page of 20 rows, its
authors and likes, to the registered Feed document's rendered dict by the compiled plan,
cursors included: the row plan where the tree has one, else FeedPost copies, PostEdge and
Post objects and the object render, as feed_connection and the plan did), `rows`
(app.feed.rows.page_rows turning 36 result rows, a next page and its read-ahead, into
FeedRows and authors; the query's reply stands in as tuples). The I/O of a page (the session GET, the filter query) and
its kernel time are not here: benchmarks/next_page_cpu.py and feed_wrk measure the whole.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime

from app.api.endpoint.schema import build_schema
from app.api.fast.compiler import compile_documents
from app.api.schema import feed
from app.api.schema.types import FeedConnection, Post, PostEdge, page_info
from app.api.upstream.strawberry import graphql_schema
from app.config import Settings
from app.feed import page as feed_page
from app.feed.cursor import CursorCodec, SessionPosition, fingerprint
from app.feed.modes import FeedMode
from app.feed.rows import FeedAuthor, FeedPost, FeedRow, PageExtras


def parts(earlier: int) -> dict[str, Callable[[], object]]:
    codec = CursorCodec("a-secret-key-of-the-usual-length-0123456789")
    fp = fingerprint(12345, FeedMode.RANKED)
    positions = [SessionPosition("k3YbJx0f2cQ1u9W8rT5vZa", earlier + n + 1) for n in range(20)]
    when = datetime(2026, 12, 1, 12, tzinfo=UTC)
    posts = [
        FeedPost(
            1_577_000_000_000_000_000 + n,
            1000 + n % 7,
            when,
            "a post body",
            "public",
            1,
            None,
            3 * n,
            n,
        )
        for n in range(20)
    ]
    ids = list(range(10_000, 10_000 + earlier + 40))
    rows = [
        (FeedRow(ids[earlier + n], 1, 0, 0, 1, "public", when, None, "b"), positions[n])
        for n in range(20)
    ]
    served = feed_page.already_served
    if "end" in inspect.signature(served).parameters:  # this change: no slice

        def served_page() -> object:
            return served(rows, ids, earlier)  # type: ignore[call-arg]
    else:

        def served_page() -> object:
            return served(rows, ids[:earlier])

    render_page = _page_render(codec, fp, positions, when)
    return {
        "cursors": lambda: [codec.encode(p, fp) for p in positions],
        "posts": lambda: [Post(row=p) for p in posts],
        "served": served_page,
        "page": render_page,
        "rows": _page_rows(when),
    }


def _page_rows(when: datetime) -> Callable[[], object]:
    """page_rows over a reply that needs no I/O: its coroutine runs to the end in one send."""
    from app.feed import rows as feed_rows

    reply = [
        (1_577_000_000_000_000_000 + n, 1000 + n % 9, 3 * n, n, 1, "public", when, None, "b",
         f"user{n % 9}", "User", 10, 5, 0, n % 3 == 0)
        for n in range(36)
    ]  # fmt: skip
    ids = [r[0] for r in reply]

    class Reads:
        async def all(self, statement: str, *args: object) -> list[tuple[object, ...]]:
            return reply

    reads = Reads()

    def run() -> object:
        coroutine = feed_rows.page_rows(reads, 7, ids, PageExtras())  # type: ignore[arg-type]
        try:
            coroutine.send(None)
        except StopIteration as done:
            return done.value
        raise RuntimeError("page_rows waited")

    return run


def _page_render(
    codec: CursorCodec, fp: str, positions: list[SessionPosition], when: datetime
) -> Callable[[], object]:
    schema = build_schema(Settings())
    by_text = schema.documents.by_text()
    text, entry = next((t, e) for t, e in by_text.items() if e.name == "Feed")
    plan = compile_documents(graphql_schema(schema), {text: entry}, schema.process_errors)[text]
    extras = PageExtras()
    rows = []
    for n in range(20):
        author = 1000 + n % 7
        extras.authors[author] = FeedAuthor(author, f"user{author}", f"User {author}", 10, 5, 0)
        post_id = 1_577_000_000_000_000_000 + n
        body = "a post body, about as long as a post usually is here #tag"
        rows.append(
            (FeedRow(post_id, author, 3 * n, n, 1, "public", when, None, body), positions[n])
        )
        extras.covered.add(post_id)
        if n % 3 == 0:
            extras.liked.add(post_id)

    def fresh() -> feed_page.FeedPage:
        return feed_page.FeedPage(list(rows), True, "k3YbJx0f2cQ1u9W8rT5vZa", False, extras=extras)

    rows_plan = getattr(plan, "rows", None)
    if rows_plan is not None:  # this change: the row plan

        def by_rows() -> object:
            value = feed._rows(fresh(), codec, fp, True, 0)  # type: ignore[attr-defined]
            return rows_plan.render(value, value.extras)

        return by_rows
    render = plan.render
    assert render is not None

    def by_objects() -> object:  # as FeedService._hydrate, feed_connection and the plan did
        page = fresh()
        page.posts = [
            FeedPost(r.post_id, r.author_id, r.created_at, r.body, r.visibility, r.version,
                     r.edited_at, r.likes, r.comments)
            for r, _ in page.rows
        ]  # fmt: skip
        edges = [
            PostEdge(cursor=codec.encode(position, fp), node=Post(row=post))
            for (_, position), post in zip(page.rows, page.posts, strict=True)
        ]
        value = FeedConnection(
            edges=edges,
            page_info=page_info(edges, page.has_next, True),
            session_id=page.session_id,  # type: ignore[arg-type]
            degraded=page.degraded,
            extras=page.extras,
        )
        return render(value, value.extras)

    return by_objects


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--earlier", type=int, default=400)
    args = parser.parse_args(argv)
    timings: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, part in parts(args.earlier).items():
            started = time.process_time()
            for _ in range(args.pages):
                part()
            timings.setdefault(name, []).append((time.process_time() - started) / args.pages * 1e6)
    for name, values in timings.items():
        rounds = ", ".join(f"{v:.1f}" for v in values)
        print(f"{name:8} {statistics.median(values):6.1f} µs per page (rounds: {rounds})")


if __name__ == "__main__":
    main()
