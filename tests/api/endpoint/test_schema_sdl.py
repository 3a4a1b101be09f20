"""graphql/schema.graphql must equal the schema the code builds (run `make schema`)."""

from __future__ import annotations

from app.api.endpoint.export_schema import SDL_PATH, current_sdl
from app.api.endpoint.schema import build_schema
from app.config import get_settings
from app.operation_documents import operations


def test_committed_sdl_matches_code() -> None:
    assert SDL_PATH.read_text() == current_sdl(get_settings()), "schema drifted: run `make schema`"


def test_every_operation_document_validates() -> None:
    schema = build_schema(get_settings())
    from graphql import parse, validate

    for name, document in operations().items():
        errors = validate(schema._schema, parse(document))
        assert not errors, (name, errors)
