"""The registered documents' ids computed from graphql/operations/, for a deployment that does
not list them (the production profile serves no /graphql/documents.json: decision 0065).
The same rule as the service's (app.api.documents, which the probe may not import): each
named operation printed with the fragments it spreads, "sha256:" and the text's SHA-256. A
test checks both agree (tests/probe/test_canaries.py)."""

from __future__ import annotations

import hashlib

from graphql import (
    DefinitionNode,
    DocumentNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    OperationDefinitionNode,
    parse,
    print_ast,
    visit,
)
from graphql.language import Visitor

from app.config import PROJECT_ROOT

OPERATIONS_DIR = PROJECT_ROOT / "graphql" / "operations"


class _Spreads(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def enter_fragment_spread(self, node: FragmentSpreadNode, *_: object) -> None:
        self.names.add(node.name.value)


def _spreads(node: OperationDefinitionNode | FragmentDefinitionNode) -> set[str]:
    visitor = _Spreads()
    visit(node, visitor)
    return visitor.names


def local_document_ids() -> dict[str, str]:
    """Operation name -> documentId for every operation under graphql/operations/."""
    definitions: list[DefinitionNode] = []
    for path in sorted(OPERATIONS_DIR.glob("*.graphql")):
        definitions.extend(parse(path.read_text()).definitions)
    fragments = {d.name.value: d for d in definitions if isinstance(d, FragmentDefinitionNode)}
    ids: dict[str, str] = {}
    for op in definitions:
        if not isinstance(op, OperationDefinitionNode) or op.name is None:
            continue
        needed: dict[str, FragmentDefinitionNode] = {}
        pending = _spreads(op)
        while pending:
            name = pending.pop()
            if name not in needed:
                needed[name] = fragments[name]
                pending |= _spreads(fragments[name])
        text = print_ast(DocumentNode(definitions=(op, *(needed[n] for n in sorted(needed)))))
        ids[op.name.value] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return ids
