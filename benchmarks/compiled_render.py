"""The compiled plan's render of one feed page, in process: CPU per page, variants
interleaved in one run (issue 24; the machine is shared, so no server or load generator).

    python -m benchmarks.compiled_render [--pages 2000] [--rounds 7]

The registered Feed document's plan (app.api.fast.compiler) renders a 20-post page built
the way feed_connection builds one (FeedConnection, PostEdge, Post objects over FeedPost
rows, authors and likes in the page's extras). Variants, same plan and page:
  plain   every leaf through its completion (the steps without `same`: before)
  same    String, ID and Boolean leaves of exactly their Python type taken as they are
  quick   also Int (in 32 bits), DateTime (isoformat) and enum leaves without the
          completion call (`Step.convert`, decision 0052)
  code    the quick steps as generated straight-line code (`_generate`, the plan's
          `render`: what a compiled request runs since decision 0052)
Prints µs per page per round (median of rounds) and the ratios; all render equal dicts.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from app.api.endpoint.schema import build_schema
from app.api.fast.codegen import _generate
from app.api.fast.compiler import compile_documents
from app.api.fast.plan import Step, _render
from app.api.schema.types import FeedConnection, Post, PostEdge, page_info
from app.api.upstream.strawberry import graphql_schema
from app.config import Settings
from app.feed.rows import FeedAuthor, FeedPost, PageExtras
from app.media.hydrate import MediaView


def page(posts: int = 20) -> FeedConnection:
    extras = PageExtras()
    edges = []
    for n in range(posts):
        author = 1000 + n % 7
        extras.authors[author] = FeedAuthor(author, f"user{author}", f"User {author}", 10, 5, 0)
        row = FeedPost(
            1_577_000_000_000_000_000 + n,
            author,
            datetime(2026, 12, 1, 12, n, tzinfo=UTC),
            f"post {n} body, about as long as a post usually is here #tag",
            "public",
            1,
            None,
            n * 3,
            n,
        )
        if n % 3 == 0:
            extras.liked.add(row.id)
        extras.covered.add(row.id)
        # Every fifth post with two images (read only by a plan selecting Post.media).
        extras.media[row.id] = [
            MediaView(f"/media/m-{n:064x}?e=1796000000&s=sig{i}", 640, 480, "image/jpeg", None)
            for i in range(2 if n % 5 == 0 else 0)
        ]
        edges.append(PostEdge(cursor=f"cursor-{n}", node=Post(row=row)))
    return FeedConnection(
        edges=edges,
        page_info=page_info(edges, True, True),
        session_id=None,
        degraded=False,
        extras=extras,
    )


def without_same(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """The steps as they were before `same`: every leaf through its completion."""
    out = []
    for step in steps:
        complete: Any = step.complete
        if type(complete) is tuple and complete and type(complete[0]) is Step:
            complete = without_same(complete)
        elif type(complete) is tuple and len(complete) == 2 and type(complete[1]) is tuple:
            complete = (complete[0], without_same(complete[1]))
        out.append(dataclasses.replace(step, same=None, convert=None, complete=complete))
    return tuple(out)


def without_convert(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """The steps as they were before `convert`: only String, ID and Boolean leaves quick."""
    out = []
    for step in steps:
        complete: Any = step.complete
        if type(complete) is tuple and complete and type(complete[0]) is Step:
            complete = without_convert(complete)
        elif type(complete) is tuple and len(complete) == 2 and type(complete[1]) is tuple:
            complete = (complete[0], without_convert(complete[1]))
        if step.convert is not None:
            step = dataclasses.replace(step, same=None, convert=None)
        out.append(dataclasses.replace(step, complete=complete))
    return tuple(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    schema = build_schema(Settings())
    text, entry = next((t, e) for t, e in schema.documents.by_text().items() if e.name == "Feed")
    plan = compile_documents(graphql_schema(schema), {text: entry}, schema.process_errors)[text]
    variants = {
        "plain": without_same(plan.steps),
        "same": without_convert(plan.steps),
        "quick": plan.steps,
    }
    value = page()
    renders: dict[str, Callable[[Any, Any], dict[str, Any]]] = {
        k: partial(_render, steps) for k, steps in variants.items()
    }
    renders["code"] = _generate(plan.steps)
    outputs = {k: render(value, value.extras) for k, render in renders.items()}
    assert outputs["plain"] == outputs["same"] == outputs["quick"] == outputs["code"]
    timings: dict[str, list[float]] = {k: [] for k in renders}
    for _ in range(args.rounds):
        for key, render in renders.items():  # interleaved: drift hits all
            started = time.process_time()
            for _ in range(args.pages):
                render(value, value.extras)
            timings[key].append((time.process_time() - started) / args.pages * 1e6)
    medians = {k: statistics.median(v) for k, v in timings.items()}
    for key, values in timings.items():
        rounds = ", ".join(f"{v:.0f}" for v in values)
        print(f"{key:6} {medians[key]:7.1f} µs per page (CPU; rounds: {rounds})")
    print(f"same / plain: {medians['same'] / medians['plain']:.2f}x the CPU")
    print(f"quick / same: {medians['quick'] / medians['same']:.2f}x the CPU")
    print(f"code / quick: {medians['code'] / medians['quick']:.2f}x the CPU")
    print(f"code / same: {medians['code'] / medians['same']:.2f}x the CPU")


if __name__ == "__main__":
    main()
