"""An import-linter contract type: upstream internals are imported by their adapters only.

import-linter's own `forbidden` contracts cannot name an external package's submodule
(`strawberry.schema.schema`: "subpackages of external packages are not valid"), because
grimp keeps each external package as one node. This contract type (`upstream_internals`,
registered in .importlinter) takes the graph's imports of each listed upstream, reads the
import statements at those lines, and fails on any import, outside the adapter modules, of

- a module of that upstream not listed as public (`public_modules`; `name.*` admits a
  module's whole subtree), or
- a name starting with `_` (a private class or function, wherever it is exported).

So a new internal import fails `lint-imports` until it moves into its adapter
(app/api/upstream, app/realtime/prometheus_internals.py) or its module is judged public here.
Attribute access (`obj._private`) is ruff's SLF001 (pyproject.toml). docs/decisions/0071.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from importlinter import Contract, ContractCheck, fields, output


def _under(module: str, prefixes: set[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def is_public(module: str, public: set[str]) -> bool:
    """`module` is listed, or under a listed `name.*`."""
    for entry in public:
        if entry.endswith(".*"):
            root = entry[:-2]
            if module == root or module.startswith(root + "."):
                return True
        elif module == entry:
            return True
    return False


def module_file(module: str) -> Path | None:
    """The source file of one of the graph's own modules, found without importing it."""
    root, _, rest = module.partition(".")
    spec = importlib.util.find_spec(root)
    if spec is None or spec.origin is None:
        return None
    base = Path(spec.origin).parent.joinpath(*rest.split(".")) if rest else None
    if base is None:
        return Path(spec.origin)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imports_at(tree: ast.Module, lines: set[int]) -> Iterator[tuple[int, str, list[str]]]:
    """(line, module imported, names imported from it) for each import statement starting on
    one of `lines` (absolute imports only: an upstream is never imported relatively)."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno not in lines:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module, [alias.name for alias in node.names]


def violations(
    importer: str, source: str, lines: set[int], upstream: str, public: set[str]
) -> list[dict[str, Any]]:
    """The internal imports of `upstream` among the statements of `source` at `lines`."""
    found = []
    for line, module, names in imports_at(ast.parse(source), lines):
        if module != upstream and not module.startswith(upstream + "."):
            continue
        private = [n for n in names if n.startswith("_")]
        if any(part.startswith("_") for part in module.split(".")) or not is_public(module, public):
            found.append({"importer": importer, "line": line, "what": f"module {module}"})
        elif private:
            what = f"{', '.join(private)} from {module}"
            found.append({"importer": importer, "line": line, "what": what})
    return found


class UpstreamInternalsContract(Contract):
    """Options: `upstreams` (top-level packages fenced), `public_modules` (their modules any
    code may import), `adapters` (modules, with their subtrees, that may import the rest)."""

    type_name = "upstream_internals"

    upstreams = fields.ListField(subfield=fields.StringField())
    public_modules = fields.ListField(subfield=fields.StringField())
    adapters = fields.ListField(subfield=fields.StringField())

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        upstreams = {str(u) for u in self.upstreams}  # type: ignore[attr-defined]
        public = {str(m) for m in self.public_modules}  # type: ignore[attr-defined]
        adapters = {str(m) for m in self.adapters}  # type: ignore[attr-defined]
        broken: list[dict[str, Any]] = []
        for upstream in sorted(upstreams):
            if upstream not in graph.modules:
                continue
            for importer in sorted(graph.find_modules_that_directly_import(upstream)):
                if _under(importer, adapters):
                    continue
                details = graph.get_import_details(importer=importer, imported=upstream)
                lines = {d["line_number"] for d in details}
                path = module_file(importer)
                if path is None:
                    continue
                source = path.read_text(encoding="utf-8")
                broken += violations(importer, source, lines, upstream, public)
        return ContractCheck(kept=not broken, metadata={"violations": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for v in check.metadata["violations"]:
            output.print_error(
                f"{v['importer']}:{v['line']} imports {v['what']}: an upstream internal, "
                "allowed in its adapter only (docs/decisions/0071)",
                bold=False,
            )
            output.new_line()
