"""The plan's generated render (app.api.fast.codegen's `_generate`, decision 0052) gives what
the step walker (`_render`) gives, and refuses (NotCompilable) what it refuses. Over HTTP,
against the regular path, tests/api/fast/test_compiled_documents.py compares the bytes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.api.endpoint.schema import build_schema
from app.api.fast.codegen import _generate
from app.api.fast.compiler import compile_documents
from app.api.fast.plan import CompiledQuery, NotCompilable, _render
from app.api.upstream.strawberry import graphql_schema
from app.config import Settings
from benchmarks.compiled_render import page
from tests.api.fast.differential import compile_text, feed_with_media


def _plans() -> list[CompiledQuery]:
    schema = build_schema(Settings())
    return list(
        compile_documents(
            graphql_schema(schema), schema.documents.by_text(), schema.process_errors
        ).values()
    )


def _both(plan: CompiledQuery, value: Any) -> tuple[Any, Any]:
    answers = []
    for render in (lambda v, e: _render(plan.steps, v, e), _generate(plan.steps)):
        try:
            answers.append(render(value, value.extras))
        except NotCompilable:
            answers.append(NotCompilable)
    return answers[0], answers[1]


def test_every_registered_feed_plan_renders_a_page_as_the_walker_does() -> None:
    plans = [p for p in _plans() if p.root_key == "feed"]
    assert plans
    for plan in plans:
        assert plan.render is not None
        walked, generated = _both(plan, page())
        assert walked == generated and walked is not NotCompilable


def test_a_feed_plan_selecting_media_renders_them_as_the_walker_does() -> None:
    plan = compile_text(feed_with_media())
    assert plan is not None and plan.render is not None
    value = page()
    walked, generated = _both(plan, value)
    assert walked == generated and walked is not NotCompilable
    assert walked["edges"][0]["node"]["media"][1]["width"] == 640  # two images, in order
    assert walked["edges"][1]["node"]["media"] == []
    value.extras.media.clear()  # a page whose media were not read: neither renders it
    assert _both(plan, value) == (NotCompilable, NotCompilable)


def test_nulls_big_ints_and_missing_authors_are_refused_alike() -> None:
    (plan,) = [p for p in _plans() if p.entry.name == "Feed"]
    cases: list[Any] = []
    value = page(3)
    edited = value.edges[0].node
    edited.edited_at = datetime(2026, 12, 2, tzinfo=UTC)  # a nullable field set
    cases.append(value)
    value = page(3)
    value.edges[1].node.body = None  # null in a non-null field
    cases.append(value)
    value = page(3)
    value.edges[2].node.like_count = 2**31  # past Int's 32 bits
    cases.append(value)
    value = page(3)
    value.extras.authors.clear()  # an author the page lacks
    cases.append(value)
    value = page(3)
    value.edges[0].node.like_count = True  # a bool where an Int is: the completion's answer
    cases.append(value)
    answers = [_both(plan, v) for v in cases]
    assert [w == g for w, g in answers] == [True] * len(cases), answers
    assert [w is NotCompilable for w, _ in answers] == [False, True, True, True, False]
