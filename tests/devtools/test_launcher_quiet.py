"""`make run` is quiet while idle (issue 39, decision 0085): the synthetic probe's traffic,
the health and metrics scrapes and the workers' routine job lines are summed up once a
minute per process, not printed a line each (~600 lines a minute before); a developer's own
requests still print, and so does the documented refusal of the legacy `graphql-ws`
subprotocol, at INFO, without uvicorn's `ERROR: ASGI callable returned without completing
handshake.`

The real minute, through the launcher (its API, relay, workers and probe), as
test_launcher_signals.py starts it, on this test's own database and Redis.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from pathlib import Path

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from app.config import Settings
from devtools import provision
from tests.devtools.test_launcher_signals import Run
from tests.helpers import eventually

BANNER_END = "Ctrl-C stops everything."
IDLE_SECONDS = 60.0  # LOG_SUMMARY_SECONDS' default: one summary per process within it
MOST_LINES = 20  # a minute's lines after the banner, at most (issue 39's bound, excluded)


def lines_after_banner(output: str) -> list[str]:
    _head, found, tail = output.partition(BANNER_END)
    assert found, output
    return [line for line in tail.splitlines() if line.strip()]


async def test_an_idle_minute_prints_a_few_lines_and_the_developers_own(tmp_path: Path) -> None:
    assert Settings.model_fields["log_summary_seconds"].default == IDLE_SECONDS
    server = os.environ["DATABASE_URL"]
    name = f"t_launcher_{uuid.uuid4().hex[:10]}"
    database_url = await provision.acreate_database(server, name)
    run = Run(
        tmp_path / "run",
        DATABASE_URL=database_url,
        REDIS_URL=os.environ["REDIS_URL"],
        SEED_DEMO="0",
        LOG_LEVEL=None,  # the default: info, quiet
        LOG_SUMMARY_SECONDS=None,
    )
    base = f"http://127.0.0.1:{run.port}"
    try:
        await run.healthy()
        # The minute starts as a developer's would, once the API answers: the probe's start
        # (its canaries signed up, its first round) falls in it.
        started = time.monotonic()
        start = len(lines_after_banner(run.output()))

        # A developer's own traffic: a query, a scrape, a legacy-subprotocol socket.
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:
            asked = await http.post("/graphql", json={"query": "{ __typename }"})
            assert asked.status_code == 200, asked.text
            assert (await http.get("/healthz")).status_code == 200
        ws_url = base.replace("http", "ws", 1) + "/graphql"
        with pytest.raises(InvalidStatus) as refused:
            async with websockets.connect(ws_url, subprotocols=["graphql-ws"]):  # type: ignore[list-item]
                pass
        assert refused.value.response.status_code == 400

        await asyncio.sleep(IDLE_SECONDS - (time.monotonic() - started))
        minute = lines_after_banner(run.output())[start:]
        # Each process's summary comes with its first routine line past its window (which
        # began at its start, before this minute did): the API's and the default lane's.
        await eventually(
            lambda: "[quiet] api:" in run.output() and "[quiet] worker:" in run.output(),
            30,
            0.2,
            "the API's and the default lane worker's summaries",
        )
        run.proc.send_signal(signal.SIGTERM)
        assert await run.exited() == 0, run.output()
    finally:
        run.kill_everything()
        await provision.adrop_database(server, name)

    text = "\n".join(minute)
    assert len(minute) < MOST_LINES, text
    # The developer's own request prints; their scrape and the probe's requests do not.
    assert sum('"POST /graphql HTTP/1.1" 200' in line for line in minute) == 1, text
    assert "GET /healthz" not in text, text
    # The refusal prints once, at INFO, and nothing at ERROR.
    assert sum('"WebSocket /graphql" 400' in line for line in minute) == 1, text
    assert "ERROR" not in run.output(), run.output()
    assert "without completing handshake" not in run.output(), run.output()
    summaries = [line for line in lines_after_banner(run.output()) if "[quiet] api:" in line]
    assert "probe traffic" in summaries[0] and "LOG_LEVEL=debug" in summaries[0], summaries
