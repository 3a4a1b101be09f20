"""Conformance: the `graphql-http` server audits (the GraphQL over HTTP spec's reference
implementation, npm `graphql-http`) against a real uvicorn serving /graphql.

The audit script is tests/api/graphql_http_audit/audit.mjs, its packages pinned by the committed
package-lock.json and installed with `npm ci` (tests/servers.py `npm_ci`). A warning is a
SHOULD of the spec the server misses, an error a MUST; both fail the test, naming the audit.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.servers import ApiServer, npm_ci

AUDIT_DIR = Path(__file__).parents[1] / "graphql_http_audit"
AUDIT_SECONDS = 120.0


async def run_audits(url: str) -> list[dict[str, Any]]:
    proc = await asyncio.create_subprocess_exec(
        "node", str(AUDIT_DIR / "audit.mjs"), url,
        cwd=AUDIT_DIR,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(AUDIT_SECONDS):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 0, f"audit.mjs exited {proc.returncode}: {err.decode()}"
    return list(json.loads(out))


async def test_graphql_http_server_audits_pass_without_warnings() -> None:
    npm_ci(AUDIT_DIR)
    async with ApiServer() as api:
        results = await run_audits(api.url + "/graphql")
    assert len(results) > 50, results  # the audits ran (graphql-http 1.23.1 has 61)
    failed = [r for r in results if r["status"] != "ok"]
    report = "\n".join(
        f"{r['status']} {r['id']} {r['name']}: {r.get('reason')} {r.get('response')}"
        for r in failed
    )
    assert not failed, f"{len(failed)} of {len(results)} audits not ok:\n{report}"
