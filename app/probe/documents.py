"""The registered documents' ids computed from graphql/operations/, for a deployment that does
not list them (the production profile serves no /graphql/documents.json: decision 0065).
The service's own rule (app.operation_documents, below the API: the probe may not import
app.api): each named operation printed with the fragments it spreads, "sha256:" and the
text's SHA-256. A test checks both agree (tests/probe/test_canaries.py)."""

from __future__ import annotations

from app.operation_documents import document_id, operations


def local_document_ids() -> dict[str, str]:
    """Operation name -> documentId for every operation under graphql/operations/."""
    return {name: document_id(text) for name, text in operations().items()}
