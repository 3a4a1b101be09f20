"""GraphiQL's welcome text (hybridfeed-graphiql.js, WELCOME) is what a newcomer copies first:
each numbered example in it parses and validates against the schema (graphql/schema.graphql,
kept equal to the served one by its own test), the headers example is the JSON the Headers
pane takes, and the editor's default query validates too. The examples cover the feed with
its reasons and the negative feedback mutations (issue 35), and the upload flow of an image
post (issue 36)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from graphql import GraphQLSchema, build_schema, parse, validate

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "app" / "api" / "transports" / "graphiql_assets" / "hybridfeed-graphiql.js"
SCHEMA_FILE = ROOT / "graphql" / "schema.graphql"
CODE_INDENT = "#      "  # an example's lines, under its numbered item


def welcome_lines() -> list[str]:
    """WELCOME's lines: the JS array of string literals, read as JSON strings."""
    match = re.search(r"var WELCOME = \[\n(.*?)\n\s*\]\.join", SCRIPT.read_text(), re.S)
    assert match is not None, "WELCOME not found in hybridfeed-graphiql.js"
    return [json.loads(line.strip().rstrip(",")) for line in match.group(1).splitlines()]


def examples() -> dict[int, str]:
    """Number -> the example's code (its indented comment lines, uncommented)."""
    found: dict[int, list[str]] = {}
    number = None
    for line in welcome_lines():
        item = re.match(r"# (\d+)\. ", line)
        if item:
            number = int(item.group(1))
            found[number] = []
        elif number is not None and line.startswith(CODE_INDENT):
            found[number].append(line[len(CODE_INDENT) :])
    return {n: "\n".join(code) for n, code in found.items()}


def default_query() -> str:
    return "\n".join(line for line in welcome_lines() if not line.startswith("#"))


def schema() -> GraphQLSchema:
    return build_schema(SCHEMA_FILE.read_text())


def assert_valid(text: str, label: str) -> None:
    errors = validate(schema(), parse(text))
    assert not errors, f"{label} does not validate: {[e.message for e in errors]}\n{text}"


def test_every_graphql_example_parses_and_validates() -> None:
    numbered = examples()
    assert sorted(numbered) == list(range(1, len(numbered) + 1)), "numbered 1, 2, 3, ..."
    assert len(numbered) >= 5
    for number, code in numbered.items():
        assert code, f"example {number} has no code"
        if code.startswith('{"'):  # the Headers pane takes JSON, not GraphQL
            assert "Authorization" in json.loads(code)
            continue
        assert_valid(code, f"example {number}")
    assert_valid(default_query(), "the default query")


def test_examples_cover_the_feed_with_reasons_and_negative_feedback() -> None:
    documents = {n: parse(code) for n, code in examples().items() if not code.startswith('{"')}
    texts = " ".join(code for code in examples().values())
    assert re.search(r"feed\(first: 10\)", texts)
    for field in ("reason", "recommendation", "hidePost", "muteAuthor", "feedUpdates", "logIn"):
        assert re.search(rf"\b{field}\b", texts), field
    kinds = {d.definitions[0].operation.value for d in documents.values()}  # type: ignore[attr-defined]
    assert kinds == {"query", "mutation", "subscription"}


def test_an_example_shows_the_upload_flow_of_an_image_post() -> None:
    """createUpload, then createPost with the upload in `media` (alt text given), the
    answer selecting the images: in one example, in that order."""
    for code in examples().values():
        if "createUpload" not in code:
            continue
        assert code.index("createUpload") < code.index("createPost"), code
        assert re.search(r"media: \[\s*\{uploadId: .+, alt: ", code), code
        assert re.search(r"media \{ url width height", code), code
        return
    raise AssertionError("no example with createUpload")
