"""The operation documents in graphql/operations/: what the demo and the tests send.

Each named operation is returned as a self-contained document (the operation plus the
fragments it spreads), ready to POST. Keeping one source avoids drift between clients. The
same texts are the server's trusted documents (app.api.transports.trusted): a client may send
`document_id(text)` instead of the text.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

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

# The wheel carries the folders the service reads besides its code here (pyproject.toml's
# [tool.hatch.build.targets.wheel.force-include]); a checkout has no such folder and reads them
# where they are, so there is one copy of each (docs/decisions/0075-installed-package.md).
SHIPPED_DIR = Path(__file__).resolve().parent / "_shipped"


def shipped_dir(relative: str) -> Path:
    """Where the folder `relative` (from the project root) is: inside the installed package
    when installed from the wheel, else in the source tree."""
    packaged = SHIPPED_DIR / relative
    return packaged if packaged.is_dir() else PROJECT_ROOT / relative


OPERATIONS_DIR = shipped_dir("graphql/operations")
DOCUMENT_ID_PREFIX = "sha256:"


def sha256_hex(text: str) -> str:
    """The hex SHA-256 of a document's UTF-8 text (Apollo's `persistedQuery.sha256Hash`)."""
    return hashlib.sha256(text.encode()).hexdigest()


def document_id(text: str) -> str:
    """The `documentId` a client sends instead of `text`: "sha256:" and its hex SHA-256."""
    return DOCUMENT_ID_PREFIX + sha256_hex(text)


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


@lru_cache
def operations() -> dict[str, str]:
    """Operation name -> document text, for every operation under graphql/operations/."""
    definitions: list[DefinitionNode] = []
    for path in sorted(OPERATIONS_DIR.glob("*.graphql")):
        definitions.extend(parse(path.read_text()).definitions)
    if not definitions:
        # Without them the compiled path and the trusted documents would be silently empty.
        raise RuntimeError(f"no operation documents under {OPERATIONS_DIR}: a broken install")
    fragments = {d.name.value: d for d in definitions if isinstance(d, FragmentDefinitionNode)}
    result: dict[str, str] = {}
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
        doc = DocumentNode(definitions=(op, *(needed[n] for n in sorted(needed))))
        result[op.name.value] = print_ast(doc)
    return result
