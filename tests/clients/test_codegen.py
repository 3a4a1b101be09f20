"""docs/API.md "Clients": GraphQL Code Generator with the documented config (apollo/codegen.ts:
client preset, `scalars: { DateTime: 'string' }`, `strictScalars`) turns graphql/schema.graphql
and the demo's documents (graphql/operations) into types that compile under `tsc --strict`
with apollo/typed.ts, which reads `createdAt` as the string the server sends."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

from tests.servers import npm_ci

APOLLO_DIR = Path(__file__).parent / "apollo"
BIN = APOLLO_DIR / "node_modules" / ".bin"
STEP_SECONDS = 180  # each step takes seconds; a loaded machine (the whole suite) stretches it


def run(*argv: str) -> None:
    result = subprocess.run(
        argv, cwd=APOLLO_DIR, capture_output=True, text=True, timeout=STEP_SECONDS
    )
    assert result.returncode == 0, f"{argv[0]} failed:\n{result.stdout}\n{result.stderr}"


def test_codegen_output_compiles_under_tsc_strict() -> None:
    npm_ci(APOLLO_DIR)
    with (APOLLO_DIR / "codegen.ts").open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # gql/ is generated in place: one session at a time
        run(str(BIN / "graphql-codegen"), "--config", "codegen.ts", "--silent")
        generated = (APOLLO_DIR / "gql" / "graphql.ts").read_text()
        run(str(BIN / "tsc"), "-p", "tsconfig.json", "--strict")
    assert "createdAt: string" in generated, "DateTime is not typed as a string"
    assert "FeedDocument" in generated, "the demo's documents were not read"
