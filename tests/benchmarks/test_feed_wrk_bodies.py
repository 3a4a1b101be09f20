"""feed_wrk's request bodies: "registered" variants name the Feed document by documentId,
"text" variants send the same query as a text the registry does not hold (otherwise the
text rows would measure the registered path), and the anchor gets the registered body."""

from __future__ import annotations

import orjson
from graphql import parse, print_ast

from app.api.endpoint.schema import build_schema
from app.config import get_settings
from app.operation_documents import document_id, operations
from benchmarks.feed_wrk import CURSOR_MARK, workloads


def test_registered_and_text_bodies_send_the_same_query() -> None:
    feed = operations()["Feed"]
    registry = build_schema(get_settings()).documents
    loads = {(w.key, w.cls): w for w in workloads({"random": [1, 2]}, {1: "a", 2: "b"}, ["random"])}
    registered = orjson.loads(loads["ranked", "random"].first_body)
    assert registered["documentId"] == document_id(feed) and "query" not in registered
    assert loads["anchor", "random"].first_body == loads["next", "random"].first_body
    for key in ("next-text", "chrono-text", "ranked-text"):
        text = orjson.loads(loads[key, "random"].first_body)["query"]
        assert registry.lookup(text) is None  # not the registered text
        assert print_ast(parse(text)) == print_ast(parse(feed))  # the same query
    nxt = loads["next-text", "random"]
    body = orjson.loads(nxt.next_prefix + "CURSOR" + nxt.next_suffix)
    assert body["variables"]["after"] == "CURSOR" and CURSOR_MARK not in nxt.next_suffix
    assert (
        orjson.loads(loads["chrono", "random"].first_body)["variables"]["mode"] == "CHRONOLOGICAL"
    )
