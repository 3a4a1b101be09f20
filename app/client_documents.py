"""A client's own persisted documents: its build's manifest read, and their table.

The build tools of GraphQL clients write the documents an app sends into a manifest, each
with the id the app will send instead of the text:

- Apollo's `@apollo/generate-persisted-query-manifest`: `{"format":
  "apollo-persisted-query-manifest", "version": 1, "operations": [{"id", "name", "type",
  "body"}]}`, the id the SHA-256 hex of the body (after Apollo added `__typename`), sent as
  `extensions.persistedQuery.sha256Hash`;
- GraphQL Code Generator's client preset (`persistedDocuments`): `{"sha256:<hex>": "<text>"}`
  (the hex SHA-256 of the text), sent as `documentId`;
- Relay's `persist` output: `{"<id>": "<text>"}` (an md5 hex by default), sent as `doc_id`.

`parse_manifest` reads any of the three into `ManifestDocument`s (no GraphQL here: the CLI,
app.documents, validates them against the schema); the functions below keep them in the
`client_documents` table (app.db.models.ClientDocument), which every API process reads
(app.api.transports.trusted). Why PostgreSQL and not Redis: decision 0083.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.models import ClientDocument

APOLLO_FORMAT = "apollo-persisted-query-manifest"
ID_PATTERN = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# The GraphQL over HTTP prefix of a SHA-256 document id; a request's "sha256:<hex>" is looked
# up as the bare hex (app.api.transports.trusted), so a manifest's is stored that way too.
SHA256_ID_PREFIX = "sha256:"
MAX_NAME_CHARS = 128


class ManifestError(ValueError):
    """A manifest this module cannot read (its shape, not its documents' validity)."""


@dataclass(frozen=True, slots=True)
class ManifestDocument:
    id: str  # what the client sends instead of the text
    name: str | None  # the operation's name, when the manifest says
    body: str
    format: str  # apollo, codegen, relay


def parse_manifest(data: object, format_: str | None = None) -> list[ManifestDocument]:
    """The documents of a decoded manifest. `format_` forces how a `{"<id>": "<text>"}` map is
    labelled (codegen or relay); by default codegen when every id is its text's SHA-256."""
    if isinstance(data, dict) and "operations" in data:
        return _apollo(data)
    if not isinstance(data, dict) or not data:
        raise ManifestError(
            "not a manifest: expected Apollo's persisted query manifest or a non-empty "
            'JSON object {"<id>": "<document text>"} (GraphQL Code Generator, Relay)'
        )
    pairs: list[tuple[str, str]] = []
    for key, body in data.items():
        if not isinstance(body, str) or not body.strip():
            raise ManifestError(f"document {key!r}: its text must be a non-empty string")
        pairs.append((_checked_id(key), body))
    if format_ is None:
        hashed = all(_SHA256_HEX.fullmatch(k) and k == _sha256_hex(b) for k, b in pairs)
        format_ = "codegen" if hashed else "relay"
    if format_ not in ("codegen", "relay"):
        raise ManifestError(f"unknown format {format_!r} for an id -> text map")
    return [ManifestDocument(k, None, b, format_) for k, b in pairs]


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _apollo(data: dict[str, object]) -> list[ManifestDocument]:
    if data.get("format") != APOLLO_FORMAT or data.get("version") != 1:
        raise ManifestError(f'an Apollo manifest needs "format": "{APOLLO_FORMAT}", "version": 1')
    operations = data.get("operations")
    if not isinstance(operations, list) or not operations:
        raise ManifestError("an Apollo manifest needs a non-empty list of operations")
    out = []
    for n, op in enumerate(operations):
        if not isinstance(op, dict):
            raise ManifestError(f"operation {n}: not an object")
        body, name = op.get("body"), op.get("name")
        if not isinstance(body, str) or not body.strip():
            raise ManifestError(f"operation {n}: its body must be a non-empty string")
        if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME_CHARS):
            raise ManifestError(f"operation {n}: its name must be a string of <= 128 characters")
        out.append(ManifestDocument(_checked_id(op.get("id")), name, body, "apollo"))
    return out


def _checked_id(value: object) -> str:
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise ManifestError(
            f"id {value!r}: ids are 1-128 characters of letters, digits and _ . : -"
        )
    return canonical_id(value)


def canonical_id(value: str) -> str:
    """The id as requests name it: "sha256:<hex>" (the client preset's ids) as the bare
    lower-case hex, any other id as it is."""
    if value.startswith(SHA256_ID_PREFIX):
        digest = value.removeprefix(SHA256_ID_PREFIX).lower()
        if _SHA256_HEX.fullmatch(digest):
            return digest
    return value


def duplicate_ids(documents: Sequence[ManifestDocument]) -> list[str]:
    """Ids that name two different texts in one manifest."""
    seen: dict[str, str] = {}
    clashes = []
    for doc in documents:
        if seen.setdefault(doc.id, doc.body) != doc.body:
            clashes.append(doc.id)
    return clashes


# -- the table -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Version:
    """What changes when the table does: a process re-reads it when this differs."""

    count: int
    latest: datetime | None


async def store(engine: AsyncEngine, documents: Sequence[ManifestDocument]) -> None:
    """Insert or replace (by id) every document, in one transaction."""
    rows = [{"id": d.id, "name": d.name, "body": d.body, "format": d.format} for d in documents]
    statement = insert(ClientDocument).values(rows)
    statement = statement.on_conflict_do_update(
        index_elements=[ClientDocument.id],
        set_={
            "name": statement.excluded.name,
            "body": statement.excluded.body,
            "format": statement.excluded.format,
            "registered_at": func.now(),
        },
    )
    async with engine.begin() as conn:
        await conn.execute(statement)


async def count_after(engine: AsyncEngine, documents: Sequence[ManifestDocument]) -> int:
    """How many documents the table would hold with these stored."""
    ids = {d.id for d in documents}
    async with engine.connect() as conn:
        known = set((await conn.execute(select(ClientDocument.id))).scalars())
    return len(known | ids)


async def load(engine: AsyncEngine) -> list[ManifestDocument]:
    """Every registered document, by id."""
    query = select(
        ClientDocument.id, ClientDocument.name, ClientDocument.body, ClientDocument.format
    ).order_by(ClientDocument.id)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [ManifestDocument(r.id, r.name, r.body, r.format) for r in rows]


async def version(engine: AsyncEngine) -> Version:
    query = select(func.count(), func.max(ClientDocument.registered_at))
    async with engine.connect() as conn:
        count, latest = (await conn.execute(query)).one()
    return Version(int(count), latest)


async def remove(engine: AsyncEngine, ids: Sequence[str], everything: bool = False) -> int:
    """Delete these ids (or every document): how many rows went."""
    statement = delete(ClientDocument)
    if not everything:
        statement = statement.where(ClientDocument.id.in_(list(ids)))
    async with engine.begin() as conn:
        result = await conn.execute(statement)
    return int(result.rowcount or 0)
