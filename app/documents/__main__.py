"""A client's own documents, from its build's manifest, on the PostgreSQL that DATABASE_URL
names (table client_documents; every API process serves them by id, docs/API.md
"Persisted queries", decision 0083).

    python -m app.documents register manifest.json [--format codegen|relay]
        Apollo's persisted query manifest, GraphQL Code Generator's `persistedDocuments` or
        Relay's persist output; each document validated against the schema with every
        request's limits and the cost rule. One bad document refuses the whole manifest
        (exit status 1, each bad document listed); else all are stored (an id already
        registered is replaced).
    python -m app.documents list
        id, format, operation name, one a line.
    python -m app.documents remove <id>... | --all
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from app import client_documents
from app.api.endpoint.schema import build_schema
from app.client_documents import parse_manifest
from app.config import Settings, get_settings
from app.db.engine import make_engine


def invalid_documents(
    settings: Settings, manifest: Sequence[client_documents.ManifestDocument]
) -> dict[str, list[str]]:
    """id -> why, for each document the schema refuses (as a request would be refused)."""
    documents = build_schema(settings).documents
    bad: dict[str, list[str]] = {}
    for doc in manifest:
        _, errors = documents.check(doc.body)
        if errors:
            bad[doc.id] = errors
    return bad


async def run_register(args: argparse.Namespace, settings: Settings) -> int:
    path = Path(args.manifest)
    try:
        manifest = parse_manifest(json.loads(await asyncio.to_thread(path.read_text)), args.format)
    except (OSError, ValueError) as exc:  # unreadable, not JSON, not a manifest
        print(f"{path}: {exc}", file=sys.stderr)
        return 1
    clashes = client_documents.duplicate_ids(manifest)
    if clashes:
        print(f"{path}: ids naming two different texts: {', '.join(clashes)}", file=sys.stderr)
        return 1
    bad = invalid_documents(settings, manifest)
    if bad:
        print(
            f"{path}: refused, nothing registered: {len(bad)} of {len(manifest)} documents "
            "do not validate against the schema:",
            file=sys.stderr,
        )
        for key, errors in bad.items():
            print(f"  {key}: {'; '.join(errors)}", file=sys.stderr)
        return 1
    engine = make_engine(settings, pool_size=1)
    try:
        total = await client_documents.count_after(engine, manifest)
        if total > settings.client_documents_max:
            print(
                f"{path}: refused: {total} client documents would be registered, more than "
                f"CLIENT_DOCUMENTS_MAX ({settings.client_documents_max}); remove some first",
                file=sys.stderr,
            )
            return 1
        await client_documents.store(engine, manifest)
    finally:
        await engine.dispose()
    print(f"registered {len(manifest)} documents ({manifest[0].format}) from {path}")
    return 0


async def run_list(args: argparse.Namespace, settings: Settings) -> int:
    engine = make_engine(settings, pool_size=1)
    try:
        documents = await client_documents.load(engine)
    finally:
        await engine.dispose()
    for doc in documents:
        print(f"{doc.id}\t{doc.format}\t{doc.name or '-'}")
    return 0


async def run_remove(args: argparse.Namespace, settings: Settings) -> int:
    if not args.ids and not args.all:
        print("name the ids to remove, or --all", file=sys.stderr)
        return 2
    engine = make_engine(settings, pool_size=1)
    try:
        ids = [client_documents.canonical_id(key) for key in args.ids]
        gone = await client_documents.remove(engine, ids, everything=args.all)
    finally:
        await engine.dispose()
    print(f"removed {gone} documents")
    return 0


Command = Callable[[argparse.Namespace, Settings], Coroutine[Any, Any, int]]
COMMANDS: dict[str, Command] = {
    "register": run_register,
    "list": run_list,
    "remove": run_remove,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app.documents", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    register = commands.add_parser("register", help="register a client's manifest")
    register.add_argument("manifest", help="the manifest's JSON file")
    register.add_argument(
        "--format",
        choices=("codegen", "relay"),
        help='label of an {"<id>": "<text>"} map (default: codegen when every id is its '
        "text's SHA-256, else relay)",
    )
    commands.add_parser("list", help="the registered client documents")
    remove = commands.add_parser("remove", help="unregister documents")
    remove.add_argument("ids", nargs="*", help="the ids to remove")
    remove.add_argument("--all", action="store_true", help="remove every client document")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return asyncio.run(COMMANDS[args.command](args, get_settings()))


if __name__ == "__main__":
    sys.exit(main())
