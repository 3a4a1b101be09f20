"""A fuzzer for the GraphQL surface (issue 11): hypothesis builds requests from the SDL
(graphql/schema.graphql) and posts them to a real server (`uvicorn app.web:app`, ApiServer).

Documents: a random root field of Query, Mutation or Subscription (over HTTP, which only
queries and mutations may use) with arguments that are valid, of the wrong type, huge
(ints past 32 and 64 bits), unicode, NUL bytes, long strings, null for non-null, missing or
unknown; as literals or as variables (declared right, wrong, or not at all); selection sets
of random depth (the schema's cycles User.posts.edges.node.author... go as deep as drawn),
aliases, fragments, unknown fields. Bombs (issue 19), by POST and GET: fragments spreading
the next one 2-4 times up to 30 levels deep, chains and cycles of fragments, hundreds of
aliases, directives, variables (used or not) and copies of one field, each answered within
BOMB_SECONDS. Besides: garbage text, deep brackets, bodies that are not the GraphQL-over-HTTP
shape (arrays, scalars, wrong content types, GET with query strings). Anonymous, with a
valid token, or with a garbage one.

Edge payloads (issue 33), by POST, GET and over a websocket (graphql-transport-ws): `after`
cursors of every paged list (`posts`, `followers`, `following`, `comments`, `feed`) that are
unsigned list cursors with dates out of range once in UTC, malformed, huge or of the wrong
type; and user text (bodies, display names, handles, search prefixes, idempotency keys) with
bidi overrides and isolates, zero-width characters, controls, combining floods, lone
surrogates in JSON escapes and text that is not in NFC.

Every answer must come within PER_REQUEST_SECONDS, never be a 5xx, never carry a traceback,
and each of its GraphQL errors must have `extensions.code` and never be INTERNAL; the
server log holds no traceback at the end. `FUZZ_REQUESTS` (default 300)
sizes the run: `FUZZ_REQUESTS=5000 make test ARGS=tests/reliability/test_fuzz.py` is the long
one (its last figures in docs/RELIABILITY.md).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from graphql import (
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    build_schema,
    get_named_type,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from app.config import PROJECT_ROOT
from tests.helpers import create_post, make_user
from tests.realtime.live import PROTOCOL
from tests.servers import ApiServer

REQUESTS = int(os.environ.get("FUZZ_REQUESTS", "300"))
SOCKET_OPERATIONS = max(REQUESTS // 3, 30)  # edge payloads over a websocket
# docs/API.md, "Live updates": every code the server may close a socket with.
DOCUMENTED_CLOSE_CODES = {1000, 1001, 1009, 1012, 1013, 4400, 4401, 4403, 4408, 4409, 4429}
PER_REQUEST_SECONDS = 10.0
# A bomb is refused (or answered) at once: the caps and linear rules of
# app.api.transports.document_limits; generous for a loaded 2-core machine (tens of ms when idle).
BOMB_SECONDS = 1.0
SCHEMA = build_schema((PROJECT_ROOT / "graphql" / "schema.graphql").read_text())
ROOTS = {
    "query": SCHEMA.query_type,
    "mutation": SCHEMA.mutation_type,
    "subscription": SCHEMA.subscription_type,
}
EXCEPTION_LINE = re.compile(r"^[\w.]+(Error|Exception|Exit)\b")
TRACEBACK_MARKS = ("Traceback (most recent call last)", 'File "/', '.py", line ')

# -- values -----------------------------------------------------------------------------------

# Unicode that hides, reorders or piles up text, and what no UTF-8 text can hold (lone
# surrogates: json.dumps sends them as \\ud800 escapes) (issue 33).
UNICODE_EDGES = [
    "admin\u202egnp.exe",  # right-to-left override
    "\u202a\u202b\u202c\u202d",  # embeddings
    "a\u2066b\u2067c\u2068d\u2069",  # isolates, one closed
    "\u200e\u200f\u061c",  # bidi marks
    "bo\u200bb",  # zero width space
    "\u200c\u200d",  # zero width non-joiner, joiner
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # an emoji sequence (ZWJ)
    "\ufeffbom",  # byte order mark
    "word\u2060joiner",
    "\u00adsoft hyphen",
    "bell\x07",
    "\x1b[31mred\x1b[0m",
    "c1\x85\x9b",
    "del\x7f",
    "line\r\nbreak\ttab",
    "line\u2028sep\u2029par",
    "z" + "\u0301\u0302\u0303\u0304\u0305\u0306" * 20,  # Zalgo
    "a" + "\u0301" * 4,  # four marks: allowed
    "e\u0301" * 40,  # not NFC: 80 characters once composed
    "Vie\u0302\u0323t",
    "\u212aelvin",  # canonically K
    "\ud800",
    "\udfff",
    "a\udc00b",
    "\ud83d",  # half an emoji's pair
    "\U000e0067\U000e0062",  # tag characters
    "\u3164",  # Hangul filler (looks blank)
]
unicode_edges = st.one_of(
    st.sampled_from(UNICODE_EDGES),
    st.lists(st.sampled_from([*UNICODE_EDGES, "ab", " ", "x"]), min_size=2, max_size=6).map(
        "".join
    ),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Cs", "Mn", "Me", "Zl", "Zp"])),
)
nasty_text = st.one_of(
    unicode_edges,
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
    st.sampled_from(
        ["", " ", "\x00", "a\x00b", "²", "١٢٣", "𝟘𝟙", "\u202e", "\ud7ff", "🙂" * 50, "'; --"]
    ),
    st.integers(1, 200_000).map(lambda n: "x" * n),
)
huge_ints = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1]),
    st.integers(-(10**40), 10**40),
)
id_like = st.one_of(
    st.integers(0, 2**70).map(str),
    st.sampled_from(["0", "-1", "1e3", "0x10", " 1", "²", "9" * 19, "9" * 400, "1\x00"]),
    nasty_text,
)
any_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | huge_ints | st.floats(allow_nan=False) | nasty_text,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def _list_cursor(stamp: str, row_id: str = "1", prefix: str = "k1:") -> str:
    """An unsigned list cursor as app.posts.keyset writes them, with any content."""
    raw = f"{prefix}{stamp}|{row_id}".encode("utf-8", "surrogatepass")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


CURSOR_DATES = [
    "0001-01-01T00:00:00+14:00",  # before year 1 once in UTC
    "9999-12-31T23:59:59-14:00",  # after year 9999 once in UTC
    "0001-01-01T00:00:00.000001+23:59:59.999999",
    "0001-01-01T00:00:00+00:00",  # the edges, in range
    "9999-12-31T23:59:59.999999+00:00",
    "2026-01-01T00:00:00",  # no offset
    "2026-13-45T99:99:99+00:00",
    "2026-W01-1T00:00+01:00",  # ISO week date
    "+002026-01-01T00:00:00+00:00",
    "2026-01-01T00:00:00+24:00",
    "nan",
    "",
]
CURSOR_IDS = ["1", "0", "-1", str(2**63), str(2**63 - 1), "9" * 5000, "١٢٣", "1e3", "", "x"]
cursor_values: st.SearchStrategy[Any] = st.one_of(
    st.builds(_list_cursor, st.sampled_from(CURSOR_DATES), st.sampled_from(CURSOR_IDS)),
    st.builds(_list_cursor, unicode_edges, st.sampled_from(CURSOR_IDS)),
    st.builds(
        _list_cursor,
        st.sampled_from(CURSOR_DATES),
        st.just("1"),
        st.sampled_from(["k2:", "", "k1", "K1:"]),
    ),
    st.sampled_from(["", "=", "====", "k1:", "!!!!", "aaa", "AAAA" * 2000, "x" * 70_000]),
    st.binary(max_size=60).map(lambda b: base64.urlsafe_b64encode(b).decode()),
    unicode_edges,
    huge_ints,
    st.lists(st.text(max_size=4), max_size=3),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
    st.booleans(),
    st.floats(),
)


def _valid_value(draw: st.DrawFn, kind: GraphQLInputType) -> Any:
    """A JSON value of the argument's type (content may still be nonsense)."""
    if isinstance(kind, GraphQLNonNull):
        return _valid_value(draw, kind.of_type)
    if isinstance(kind, GraphQLList):
        return [_valid_value(draw, kind.of_type) for _ in range(draw(st.integers(0, 3)))]
    named = get_named_type(kind)
    if isinstance(named, GraphQLEnumType):
        return draw(st.sampled_from(list(named.values)))
    name = getattr(named, "name", "")
    if name == "Int":
        return draw(st.integers(-(2**31), 2**31 - 1) | st.sampled_from([0, 1, 20, 100, -1]))
    if name == "Boolean":
        return draw(st.booleans())
    if name == "ID":
        return draw(id_like)
    if name == "Float":
        return draw(st.floats(allow_nan=False, allow_infinity=False))
    return draw(nasty_text)  # String, DateTime, custom scalars


def _any_value(draw: st.DrawFn, kind: GraphQLInputType) -> Any:
    """Mostly of the right type; sometimes wrong, huge, null or a random JSON value."""
    choice = draw(st.integers(0, 9))
    if choice < 6:
        return _valid_value(draw, kind)
    if choice == 6:
        return None
    if choice == 7:
        return draw(huge_ints)
    return draw(any_json)


def _literal(value: Any, enum: bool = False) -> str:
    """A JSON value as a GraphQL literal (strings JSON-escaped, which GraphQL accepts)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if enum and value.isidentifier() else json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"k{i}: {_literal(v)}" for i, v in enumerate(value.values())) + "}"
    return json.dumps(value)


def _type_text(kind: GraphQLInputType) -> str:
    return str(kind)


# -- documents --------------------------------------------------------------------------------


@dataclass
class Built:
    variables: dict[str, Any]
    declarations: list[str]


def _arguments(draw: st.DrawFn, field: GraphQLField, built: Built) -> str:
    parts: list[str] = []
    for name, arg in field.args.items():
        mode = draw(st.integers(0, 9))
        if mode == 0:  # left out (required ones: an error)
            continue
        enum = isinstance(get_named_type(arg.type), GraphQLEnumType)
        cursor = name == "after" and draw(st.booleans())
        if mode <= 5:  # literal
            value = draw(cursor_values) if cursor else _any_value(draw, arg.type)
            parts.append(f"{name}: {_literal(value, enum)}")
            continue
        var = f"v{len(built.declarations)}"
        declared = draw(
            st.sampled_from([_type_text(arg.type), _type_text(arg.type), "String", "Int!", "[ID]"])
        )
        if mode < 9:
            built.declarations.append(f"${var}: {declared}")
        if draw(st.booleans()):
            built.variables[var] = draw(cursor_values) if cursor else _any_value(draw, arg.type)
        parts.append(f"{name}: ${var}")
    if draw(st.integers(0, 15)) == 0:
        parts.append(f"bogus: {_literal(draw(any_json))}")
    return f"({', '.join(parts)})" if parts else ""


def _selection(draw: st.DrawFn, kind: Any, depth: int, built: Built) -> str:
    named = get_named_type(kind)
    if not isinstance(named, GraphQLObjectType):
        return ""
    if depth <= 0:
        return " { __typename }"
    fields = list(named.fields.items())
    picked = draw(st.lists(st.sampled_from(fields), min_size=1, max_size=4))
    out: list[str] = []
    for i, (name, field) in enumerate(picked):
        alias = f"a{i}: " if draw(st.integers(0, 3)) == 0 else ""
        args = _arguments(draw, field, built) if field.args else ""
        out.append(f"{alias}{name}{args}{_selection(draw, field.type, depth - 1, built)}")
    extra = draw(st.integers(0, 12))
    if extra == 0:
        out.append("nope")
    elif extra == 1:
        out.append(f"... on {named.name} {{ __typename }}")
    return " { " + " ".join(out) + " }"


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A JSON body {query, variables, operationName?} built from the SDL."""
    op = draw(st.sampled_from(["query", "query", "mutation", "mutation", "subscription"]))
    root = ROOTS[op]
    assert root is not None
    name, field = draw(st.sampled_from(list(root.fields.items())))
    built = Built({}, [])
    depth = draw(st.integers(0, 3) | st.integers(4, 12))
    args = _arguments(draw, field, built) if field.args else ""
    selection = _selection(draw, field.type, depth, built)
    if isinstance(get_named_type(field.type), GraphQLScalarType) and draw(st.integers(0, 5)) == 0:
        selection = " { id }"  # a selection on a scalar
    decl = f"({', '.join(built.declarations)})" if built.declarations else ""
    op_name = draw(st.sampled_from(["", "Fuzz"]))
    text = f"{op} {op_name}{decl} {{ {name}{args}{selection} }}"
    body: dict[str, Any] = {"query": text, "variables": built.variables}
    if op_name or draw(st.integers(0, 5)) == 0:
        body["operationName"] = draw(st.sampled_from([op_name or "Fuzz", "Other", ""]))
    return body


garbage_documents = st.one_of(
    st.text(max_size=300),
    st.sampled_from(
        [
            "{",
            "}",
            "query {",
            "{ feed { edges } }",
            "query Q { viewer { id } } query Q { viewer { id } }",
            "fragment F on User { ...F } query { viewer { ...F } }",
            "{ __schema { types { name } } }",
            "subscription { feedUpdates { newPostCount } }",
        ]
    ),
    st.integers(1, 20_000).map(lambda n: "{ viewer " * n + "}" * n),
    st.integers(1, 3000).map(
        lambda n: "query { " + " ".join(f"a{i}: viewer {{ id }}" for i in range(n)) + " }"
    ),
)


# -- bombs: small documents that multiply work (issue 19) ---------------------------------------

FIELDS = [
    "viewer { id }",
    "feed(first: 100) { edges { cursor } }",
    'user(handle: "x") { posts(first: 100) { edges { node { id } } } }',
]
LEAVES = [*FIELDS, "a: viewer { handle }", "__typename"]


@st.composite
def fragment_bombs(draw: st.DrawFn) -> str:
    """Fragments spreading the next one `fan` times, `levels` deep (fan^levels copies), or a
    chain of fragments each one level deeper, or a cycle."""
    levels = draw(st.integers(1, 30))
    fan = draw(st.integers(2, 4))
    shape = draw(st.sampled_from(["fan", "chain", "cycle"]))
    if shape == "cycle":
        return "query { ...F0 } " + " ".join(
            f"fragment F{i} on Query {{ ...F{(i + 1) % levels} }}" for i in range(levels)
        )
    if shape == "chain":
        deeper = "viewer {{ posts(first: 100) {{ edges {{ node {{ author {{ ...F{} }} }} }} }} }}"
        parts = [f"fragment F{i} on Query {{ {deeper.format(i + 1)} }}" for i in range(levels)]
    else:
        spreads = " ".join(["...F{}"] * fan)
        parts = [
            f"fragment F{i} on Query {{ {spreads.format(*[i + 1] * fan)} }}" for i in range(levels)
        ]
    parts.append(f"fragment F{levels} on Query {{ {draw(st.sampled_from(LEAVES))} }}")
    return "query { ...F0 } " + " ".join(parts)


@st.composite
def alias_bombs(draw: st.DrawFn) -> str:
    field = draw(st.sampled_from(FIELDS))
    return "query { " + " ".join(f"a{i}: {field}" for i in range(draw(st.integers(1, 600)))) + " }"


@st.composite
def directive_bombs(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    directive = draw(
        st.sampled_from(["@include(if: true)", "@skip(if: $v)", "@deprecated", "@nope(x: 1)"])
    )
    directives = " ".join([directive] * draw(st.integers(1, 400)))
    return f"query($v: Boolean) {{ viewer {directives} {{ id }} }}", {"v": draw(any_json)}


@st.composite
def variable_bombs(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    n = draw(st.integers(1, 600))
    used = draw(st.booleans())
    kind = draw(st.sampled_from(["Int", "String!", "[ID]", "Boolean", "Nope"]))
    declared = " ".join(f"$v{i}: {kind}" for i in range(n))
    body = (
        " ".join(f"a{i}: viewer @include(if: $v{i}) {{ id }}" for i in range(n))
        if used
        else "viewer { id }"
    )
    values = {f"v{i}": draw(any_json) for i in range(draw(st.integers(0, min(n, 50))))}
    return f"query({declared}) {{ {body} }}", values


@st.composite
def repeat_bombs(draw: st.DrawFn) -> str:
    """One response key many times in one selection set (graphql-core compares each pair)."""
    n = draw(st.integers(2, 500))
    inline = draw(st.booleans())
    copy = "... { viewer { id } }" if inline else "viewer { id }"
    return "{ " + " ".join([copy] * n) + " }"


@st.composite
def bombs(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["fragment", "alias", "directive", "variable", "repeat"]))
    variables: dict[str, Any] = {}
    if kind == "fragment":
        text = draw(fragment_bombs())
    elif kind == "alias":
        text = draw(alias_bombs())
    elif kind == "directive":
        text, variables = draw(directive_bombs())
    elif kind == "variable":
        text, variables = draw(variable_bombs())
    else:
        text = draw(repeat_bombs())
    return {"query": text, "variables": variables}


# -- edge payloads: cursors and user text where they are used (issue 33) ------------------------

PAGE = "edges { cursor } pageInfo { endCursor }"
CURSOR_DOCUMENTS = [
    f"query($a: String) {{ viewer {{ posts(after: $a) {{ {PAGE} }} }} }}",
    f"query($a: String) {{ viewer {{ followers(after: $a) {{ {PAGE} }} }} }}",
    f"query($a: String) {{ viewer {{ following(first: 5, after: $a) {{ {PAGE} }} }} }}",
    f'query($a: String) {{ user(handle: "fuzzer") {{ posts(after: $a) {{ {PAGE} }} }} }}',
    "query($a: String) { viewer { posts(first: 1) { edges { node { "
    f"comments(after: $a) {{ {PAGE} }} }} }} }} }}",
    f"query($a: String) {{ feed(after: $a) {{ {PAGE} }} }}",
    f"query($a: String) {{ feed(after: $a, mode: CHRONOLOGICAL) {{ {PAGE} }} }}",
]
TEXT_DOCUMENTS = [
    "mutation($t: String!) { updateProfile(displayName: $t) { displayName } }",
    "mutation($t: String!) { createPost(body: $t) { body } }",
    'mutation($t: String!) { createPost(body: "x", idempotencyKey: $t) { id } }',
    'mutation($t: String!) { signUp(handle: $t, password: "password123") { token } }',
    'mutation($t: String!) { signUp(handle: "edgy", password: "password123", '
    "displayName: $t) { token } }",
    'mutation($t: String!) { logIn(handle: $t, password: "password123") { token } }',
    "query($t: String!) { searchUsers(prefix: $t) { handle } }",
    "query($t: String!) { user(handle: $t) { handle } }",
    "mutation($t: String!) { follow(handle: $t) { handle } }",
]
COMMENT = "mutation($p: ID!, $t: String!) { addComment(postId: $p, body: $t) { body } }"
POST_ID = ["1"]  # the fuzzer's own post, once the server runs


@st.composite
def edge_operations(draw: st.DrawFn) -> dict[str, Any]:
    """A list page after a fuzzed cursor, or a text argument with a Unicode edge case: as a
    variable or (sometimes) a literal; now and then with an operationName that is one."""
    if draw(st.booleans()):
        query, name, value = draw(st.sampled_from(CURSOR_DOCUMENTS)), "a", draw(cursor_values)
    elif draw(st.integers(0, 9)) == 0:
        text = draw(unicode_edges | nasty_text)
        return {"query": COMMENT, "variables": {"p": POST_ID[0], "t": text}}
    else:
        query, name = draw(st.sampled_from(TEXT_DOCUMENTS)), "t"
        value = draw(unicode_edges | nasty_text)
    if isinstance(value, str) and draw(st.integers(0, 4)) == 0:  # the value as a literal
        declaration = query[query.index("(") : query.index(")") + 1]
        query = query.replace(declaration, "", 1).replace(f"${name}", _literal(value))
        return {"query": query, "variables": {}}
    body: dict[str, Any] = {"query": query, "variables": {name: value}}
    if draw(st.integers(0, 9)) == 0:
        body["operationName"] = draw(unicode_edges)
    return body


@dataclass
class Request:
    method: str
    content: bytes | None
    params: dict[str, str] | None
    content_type: str | None
    auth: str  # none | valid | garbage
    bomb: bool = False  # answered within BOMB_SECONDS

    def describe(self) -> str:
        shown = (self.content or b"")[:300]
        return f"{self.method} {self.content_type} auth={self.auth} params={self.params} {shown!r}"


@st.composite
def requests(draw: st.DrawFn) -> Request:
    auth = draw(st.sampled_from(["none", "valid", "valid", "garbage"]))
    kind = draw(st.integers(0, 27))
    if kind >= 23:  # an edge payload, by POST (JSON in ASCII: \\u escapes) or GET
        edge = draw(edge_operations())
        auth = draw(st.sampled_from(["valid", "valid", "valid", "none"]))
        if draw(st.integers(0, 3)) > 0:
            content = json.dumps(edge).encode()
            return Request("POST", content, None, "application/json", auth)
        variables = json.dumps(edge["variables"])[:6000]
        params = {"query": edge["query"][:6000], "variables": variables}
        return Request("GET", None, params, None, auth)
    if kind >= 20:  # a bomb, by POST or GET
        bomb = draw(bombs())
        if draw(st.booleans()):
            return Request("POST", json.dumps(bomb).encode(), None, "application/json", auth, True)
        variables = json.dumps(bomb["variables"])[:4000].replace("\x00", "")
        params = {"query": bomb["query"][:6000], "variables": variables}
        return Request("GET", None, params, None, auth, True)
    if kind < 13:
        body: Any = draw(documents())
    elif kind < 15:
        body = {"query": draw(garbage_documents), "variables": draw(st.none() | any_json)}
    elif kind < 17:  # not the GraphQL-over-HTTP shape
        body = draw(
            st.one_of(
                any_json,
                st.lists(documents(), min_size=1, max_size=3),
                st.fixed_dictionaries({"query": any_json}),
                st.fixed_dictionaries(
                    {"query": st.just("{ viewer { id } }"), "variables": any_json}
                ),
                st.fixed_dictionaries(
                    {"query": st.just("{ viewer { id } }"), "extensions": any_json}
                ),
            )
        )
    elif kind == 17:  # raw bytes
        content = draw(st.binary(max_size=500) | st.text(max_size=200).map(str.encode))
        ctype = draw(
            st.sampled_from(["application/json", "text/plain", "application/graphql", None])
        )
        return Request("POST", content, None, ctype, auth)
    else:  # GET with the query string
        doc = draw(documents() | st.fixed_dictionaries({"query": garbage_documents}))
        params = {"query": doc["query"].replace("\x00", "")[:4000]}
        if doc.get("variables"):
            params["variables"] = json.dumps(doc["variables"])[:4000].replace("\x00", "")
        return Request("GET", None, params, None, auth)
    content = json.dumps(body).encode()
    ctype = draw(
        st.sampled_from(
            ["application/json"] * 6 + ["application/json; charset=utf-8", "text/plain"]
        )
    )
    return Request("POST", content, None, ctype, auth)


# -- the checks -------------------------------------------------------------------------------


@dataclass
class Tally:
    requests: int = 0
    statuses: Counter[int] | None = None
    codes: Counter[str] | None = None
    slowest: float = 0.0
    bombs: int = 0
    slowest_bomb: float = 0.0
    slowest_bomb_text: str = ""

    def __post_init__(self) -> None:
        self.statuses, self.codes = Counter(), Counter()


def internal_error(body: Any) -> str | None:
    """What an INTERNAL error in a GraphQL response body says (None: there is none)."""
    errors = body.get("errors") if isinstance(body, dict) else None
    for error in errors if isinstance(errors, list) else []:
        if isinstance(error, dict) and (error.get("extensions") or {}).get("code") == "INTERNAL":
            return f"INTERNAL at {str(error.get('path'))[:80]}"
    return None


def defect(response: httpx.Response, tally: Tally) -> str | None:
    """What is wrong with an answer (None: nothing); counts it in `tally`."""
    assert tally.statuses is not None and tally.codes is not None
    tally.requests += 1
    tally.statuses[response.status_code] += 1
    tally.slowest = max(tally.slowest, response.elapsed.total_seconds())
    text = response.text
    if response.status_code >= 500:
        return f"HTTP {response.status_code}: {text[:120]!r}"
    if any(mark in text for mark in TRACEBACK_MARKS):
        return f"a traceback in the body: {text[:300]!r}"
    if "json" not in response.headers.get("content-type", ""):
        return None
    try:
        body = response.json()
    except ValueError:
        return f"unreadable JSON: {text[:120]!r}"
    if not isinstance(body, dict):
        return None
    for error in body.get("errors") or []:
        code = (error.get("extensions") or {}).get("code")
        if not code:
            return f"an error without extensions.code: {str(error.get('message'))[:80]!r}"
        tally.codes[code] += 1
    return internal_error(body)


class ServerLog:
    """The server's exception lines since the last look (what a 500 was)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, path.stat().st_size

    def new_exceptions(self, within: float = 1.0) -> list[str]:
        """Exception lines logged since the last call; uvicorn logs them after the 500 went
        out, so wait for one (up to `within` s, checked as the log grows)."""
        deadline = time.monotonic() + within
        found: list[str] = []
        while not found and time.monotonic() < deadline:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read().decode(errors="replace")
                self.offset = f.tell()
            found = [line for line in chunk.splitlines() if EXCEPTION_LINE.match(line)]
            if not found:
                time.sleep(0.02)
        return found[-1:]


def fuzz(url: str, token: str, tally: Tally, log: ServerLog) -> dict[str, str]:
    """Runs the requests; the defects found, one example each (the shortest)."""
    headers_for = {
        "none": {},
        "valid": {"Authorization": f"Bearer {token}"},
        "garbage": {"Authorization": "Bearer eyJhbGciOiJub25lIn0.e30.not-a-signature"},
    }
    found: dict[str, str] = {}
    previous = ["(none)"]  # the request before, when a connection drops
    with httpx.Client(base_url=url, timeout=PER_REQUEST_SECONDS) as client:

        @settings(
            max_examples=REQUESTS,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(requests())
        def one(request: Request) -> None:
            headers = dict(headers_for[request.auth])
            if request.content_type:
                headers["Content-Type"] = request.content_type
            try:
                response = client.request(
                    request.method,
                    "/graphql",
                    content=request.content,
                    params=request.params,
                    headers=headers,
                )
            except httpx.TimeoutException:
                problem: str | None = f"no answer within {PER_REQUEST_SECONDS} s"
            except httpx.TransportError as exc:  # the server dropped the connection
                problem = f"connection dropped ({type(exc).__name__}), after: {previous[-1]}"
            else:
                problem = defect(response, tally)
                took = response.elapsed.total_seconds()
                if request.bomb:
                    tally.bombs += 1
                    if took > tally.slowest_bomb:
                        tally.slowest_bomb, tally.slowest_bomb_text = took, request.describe()
                    if problem is None and took > BOMB_SECONDS:
                        problem = f"a bomb took {took:.2f} s"
            previous[-1] = request.describe()
            if problem is None:
                return
            kind = problem.split(":")[0]
            if problem.startswith(("HTTP 5", "connection dropped")):
                kind += " " + " | ".join(line.split(":")[0] for line in log.new_exceptions())
            example = request.describe() + ("; " + problem if "after:" in problem else "")
            if kind not in found or len(example) < len(found[kind]):
                found[kind] = example

        one()
    return found


# -- edge payloads over a websocket --------------------------------------------------------------


def open_socket(sockets: ExitStack, url: str, token: str) -> ClientConnection:
    """A graphql-transport-ws socket, acknowledged (closed with `sockets`)."""
    ws = sockets.enter_context(
        connect(url, subprotocols=[PROTOCOL], open_timeout=PER_REQUEST_SECONDS)
    )  # type: ignore[list-item]
    init = {"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}}
    ws.send(json.dumps(init))
    reply = json.loads(ws.recv(timeout=PER_REQUEST_SECONDS))
    assert reply.get("type") == "connection_ack", reply
    return ws


def socket_answer(ws: ClientConnection, op_id: str) -> list[dict[str, Any]]:
    """The messages for one operation, up to its `complete` or `error`."""
    out: list[dict[str, Any]] = []
    while True:
        message = json.loads(ws.recv(timeout=PER_REQUEST_SECONDS))
        if message.get("type") == "ping":
            ws.send(json.dumps({"type": "pong"}))
        elif message.get("id") == op_id:
            out.append(message)
            if message.get("type") in ("complete", "error"):
                return out


def socket_defect(messages: list[dict[str, Any]], tally: Tally) -> str | None:
    """What is wrong with an operation's messages: an error without a code, or INTERNAL."""
    assert tally.codes is not None
    tally.requests += 1
    for message in messages:
        payload = message.get("payload")
        errors = payload if message["type"] == "error" else (payload or {}).get("errors")
        for error in errors or []:
            code = (error.get("extensions") or {}).get("code")
            if not code:
                return f"an error without extensions.code: {str(error.get('message'))[:80]!r}"
            tally.codes[code] += 1
            if code == "INTERNAL":
                return f"INTERNAL at {str(error.get('path'))[:80]}"
    return None


def fuzz_socket(url: str, token: str, tally: Tally) -> dict[str, str]:
    """Edge payloads as `subscribe` messages, one operation at a time; the defects found.
    A message the server cannot take (a lone surrogate: its JSON decoder refuses it) may
    close the socket with a documented code; the next operation opens another."""
    found: dict[str, str] = {}
    stack = ExitStack()
    sockets = [open_socket(stack, url, token)]
    ids = iter(range(1_000_000))

    @settings(
        max_examples=SOCKET_OPERATIONS,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(edge_operations())
    def one(body: dict[str, Any]) -> None:
        op_id = f"e{next(ids)}"
        ws = sockets[-1]
        try:
            ws.send(json.dumps({"type": "subscribe", "id": op_id, "payload": body}))
            problem = socket_defect(socket_answer(ws, op_id), tally)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
            problem = None if code in DOCUMENTED_CLOSE_CODES else f"socket closed with {code}"
            sockets.append(open_socket(stack, url, token))
        except TimeoutError:
            problem = f"no answer within {PER_REQUEST_SECONDS} s"
            ws.close()
            sockets.append(open_socket(stack, url, token))
        if problem is None:
            return
        example = json.dumps(body)[:300]
        kind = "websocket: " + problem.split(":")[0]
        if kind not in found or len(example) < len(found[kind]):
            found[kind] = example

    with stack:
        one()
    return found


async def test_graphql_surface_survives_fuzzing() -> None:
    tally = Tally()
    async with ApiServer() as api:
        async with api.http() as http:
            token, _ = await make_user(http, "fuzzer")
            POST_ID[0] = (await create_post(http, token, "the fuzzer's post"))["id"]
            # Its own account: the HTTP requests may log the fuzzer's token out (logOut).
            socket_token, _ = await make_user(http, "socket_fuzzer")
        found = await asyncio.to_thread(fuzz, api.url, token, tally, ServerLog(api.log))
        found |= await asyncio.to_thread(fuzz_socket, api.ws_url, socket_token, tally)
        async with api.http() as http:
            assert (await http.get("/healthz")).status_code == 200, "the server died"
        log = api.log.read_text(errors="replace")
        if "Traceback" in log:
            found["a traceback in the server log"] = log[log.index("Traceback") :][:600]
    print(
        f"\nfuzz: {tally.requests} requests, statuses {dict(tally.statuses or {})}, "
        f"codes {dict(tally.codes or {})}, slowest {tally.slowest:.2f} s, "
        f"{tally.bombs} bombs (slowest {tally.slowest_bomb:.3f} s: "
        f"{tally.slowest_bomb_text[:160]}), "
        f"defects {len(found)}"
    )
    assert not found, "\n".join(f"{kind}\n    e.g. {example}" for kind, example in found.items())
