"""The synthetic probe's canaries (issue 33, decision 0065), `python -m app.probe` against a
real API process and workers (tests/probe/conftest.py's fixtures):

- their handles start with the deployment's secret prefix (from SECRET_KEY), so someone who
  registered the old fixed handles (`probe_0` ...) first changes nothing;
- nobody else finds them (searchUsers) or follows them (NOT_FOUND, as an unknown handle);
- their posts are FOLLOWERS-only (seen within the ring alone) and pruned after
  CANARY_POSTS_RETENTION_SECONDS by a worker job, other users' old posts untouched;
- against a production API (no /graphql/documents.json) the probe computes the document ids
  itself, and they are the ones the development server lists.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import app.config
from app.config import PROJECT_ROOT
from jobs import tasks
from tests.helpers import codes, gql, make_user, post, sql
from tests.probe.probing import probe, service
from tests.servers import ApiServer

SQUATTER_PASSWORD = "not-the-probe-password"


async def canaries() -> list[str]:
    return [r["handle"] for r in await sql("SELECT handle FROM users WHERE canary ORDER BY id")]


async def test_canaries_are_secret_hidden_and_followers_only(
    write_path: None, metrics_dir: Path
) -> None:
    async with service(metrics_dir) as api, api.http() as http:
        # Someone registers the handles an older probe used, before its first start.
        for i in range(4):
            await make_user(http, f"probe_{i}", password=SQUATTER_PASSWORD)
        outsider, _ = await make_user(http, "outsider", "Probe canary fan")

        code, [report] = await probe(api, metrics_dir, "--once")
        assert (code, report["result"], report["errors"]) == (0, "ok", []), report

        handles = await canaries()
        prefix = app.config.canary_handle_prefix(os.environ["SECRET_KEY"])
        assert handles == [f"{prefix}{i}" for i in range(4)]
        assert len(prefix) >= 17 and not prefix.startswith("probe")

        # Not found by handle or display name, by a signed-in user or anonymously.
        for query in (prefix[:2], prefix, "probe", "Probe canary"):
            for token in (outsider, None):
                found = (await gql(http, "SearchUsers", {"prefix": query}, token)).ok()
                assert not set(handles) & {u["handle"] for u in found["searchUsers"]}, query
        # Not followable by anyone but another canary: as if the handle did not exist.
        refused = await gql(http, "Follow", {"handle": handles[0]}, outsider)
        assert codes({"errors": refused.errors}) == ["NOT_FOUND"]
        unknown = await gql(http, "Follow", {"handle": "nobody_here"}, outsider)
        assert (
            refused.errors[0]["message"].replace(handles[0], "nobody_here")
            == (unknown.errors[0]["message"])
        )
        # Its posts: FOLLOWERS-only (PRIVATE once a round narrowed them), so nobody outside
        # the ring sees one.
        visibilities = await sql(
            "SELECT DISTINCT visibility FROM posts JOIN users u ON u.id = author_id WHERE canary"
        )
        assert {r["visibility"] for r in visibilities} == {"followers", "private"}
        for token in (outsider, None):
            profile = (await gql(http, "UserProfile", {"handle": handles[0]}, token)).ok()
            assert profile["user"]["posts"]["edges"] == []
        # The squatters are ordinary accounts, untouched.
        squatters = await sql("SELECT handle, canary FROM users WHERE handle LIKE 'probe%'")
        assert sorted((r["handle"], r["canary"]) for r in squatters) == [
            (f"probe_{i}", False) for i in range(4)
        ]


async def test_old_canary_posts_are_pruned(write_path: None, metrics_dir: Path, state: Any) -> None:
    async with service(metrics_dir) as api, api.http() as http:
        code, _ = await probe(api, metrics_dir, "--once")
        assert code == 0
        token, _ = await make_user(http, "someone")
        kept = await post(http, token, "an ordinary old post")
        made = (await sql("SELECT count(*) AS n FROM posts"))[0]["n"]
        assert made > 1
        # Everything ages past the retention (6 hours by default).
        await sql("UPDATE posts SET created_at = created_at - interval '7 hours'")

        pruned = await tasks.prune_canary_posts({"state": state})

        left = await sql("SELECT id FROM posts")
        assert pruned == made - 1
        assert [r["id"] for r in left] == [kept]
        # The ring goes on over the pruned posts' ids (still in the canaries' timelines).
        code, [report] = await probe(api, metrics_dir, "--once")
        assert (code, report["result"], report["errors"]) == (0, "ok", []), report


async def test_the_probe_runs_against_production_without_the_documents_list(
    write_path: None, metrics_dir: Path
) -> None:
    async with ApiServer() as dev, dev.http() as http:
        listed = (await http.get("/graphql/documents.json")).json()
    from app.probe.documents import local_document_ids

    assert local_document_ids() == listed

    async with service(metrics_dir, PROFILE="production") as api, api.http() as http:
        assert (await http.get("/graphql/documents.json")).status_code == 404
        code, [report] = await probe(api, metrics_dir, "--once")
    assert (code, report["result"], report["errors"]) == (0, "ok", []), report


def test_show_prefix_prints_the_deployments_secret_prefix() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "app.probe", "--show-prefix"],
        cwd=PROJECT_ROOT,
        env={**os.environ, "SECRET_KEY": "s" * 40},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert shown == app.config.canary_handle_prefix("s" * 40)
    assert shown != app.config.canary_handle_prefix(os.environ["SECRET_KEY"])
