"""`/readyz`: 200 while PostgreSQL, Redis and a worker on every lane answer; otherwise 503 with a
JSON body naming what is down. `/healthz` stays the liveness answer."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from app.config import PROJECT_ROOT, get_settings
from app.fanout import lanes
from app.state import create_state
from app.web import create_app
from tests.conftest import TEST_REDIS_DB
from tests.helpers import eventually
from tests.servers import free_port, stop_process

WORKERS = {"default": "jobs.worker.WorkerSettings", "big": "jobs.worker.BigLaneWorkerSettings"}


@pytest.fixture
def workers() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Real ARQ workers, one per lane, stopped (SIGTERM, as `make run` does) at the end."""
    procs = {
        lane: subprocess.Popen(
            [sys.executable, "-m", "arq", settings],
            cwd=PROJECT_ROOT,
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for lane, settings in WORKERS.items()
    }
    assert set(procs) == set(lanes.LANES)
    try:
        yield procs
    finally:
        for proc in procs.values():
            stop_process(proc)


async def test_ready_follows_the_workers(client: httpx.AsyncClient, workers) -> None:
    async def ready() -> httpx.Response | None:
        response = await client.get("/readyz")
        return response if response.status_code == 200 else None

    response = await eventually(ready, within=30, what="/readyz 200 with both lanes' workers")
    assert response.json() == {
        "status": "ready",
        "down": [],
        "checks": {"postgres": "ok", "redis": "ok", "workers:default": "ok", "workers:big": "ok"},
    }

    # A lane without a worker: posts of big authors would never fan out.
    stop_process(workers["big"])

    async def big_lane_down() -> httpx.Response | None:
        response = await client.get("/readyz")
        return response if response.status_code == 503 else None

    body = (await eventually(big_lane_down, within=15, what="/readyz 503")).json()
    assert body["status"] == "unavailable"
    assert body["down"] == ["workers:big"]
    assert body["checks"]["workers:default"] == "ok"
    assert (await client.get("/healthz")).status_code == 200  # alive, only not ready


async def test_redis_on_a_closed_port_is_named(test_database: str) -> None:
    settings = get_settings().model_copy(
        update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}  # nothing listens there
    )
    broken = create_state(settings)
    try:
        app = create_app(broken)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            response = await c.get("/readyz")
    finally:
        await broken.close()
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["postgres"] == "ok"
    # Redis is down, and with it the only evidence of live workers.
    assert body["down"] == ["redis", "workers:default", "workers:big"]
    assert body["checks"]["redis"] != "ok"
    assert "Traceback" not in response.text


async def test_a_flood_of_probes_costs_one_check_a_second(state) -> None:
    """/healthz and /readyz answer anyone: 200 probes at once (and more within the second)
    must not become 200 rounds of SQL and Redis. Counted on the real Redis with MONITOR
    (this session's database only): each readiness or health check sends one PING, whatever
    the number of callers. A marker command sent last ends the count: Redis reports commands
    in the order it ran them, so every PING of the flood comes before it."""
    from app.web import create_app

    # A fresh app: the session's `client` shares its probe caches with earlier tests, whose
    # last check may still be fresh (no PING at all then).
    transport = httpx.ASGITransport(app=create_app(state))
    client = httpx.AsyncClient(transport=transport, base_url="http://testserver")
    marker = "probe-flood-done"
    pings = 0
    # The clients PING a pooled connection idle for 30 s before reusing it (redis-py's
    # health_check_interval): such PINGs are not the probes'. Fresh connections send none.
    for redis_client in state.roles.clients():
        await redis_client.connection_pool.disconnect(inuse_connections=False)
    async with state.redis.monitor() as stream:
        listening = asyncio.Event()

        async def count() -> None:
            nonlocal pings
            listening.set()
            async for command in stream.listen():
                if command["db"] != TEST_REDIS_DB:
                    continue
                if command["command"].upper() == "PING":
                    pings += 1
                elif marker in command["command"]:
                    return

        counter = asyncio.create_task(count())
        await listening.wait()
        started = time.monotonic()
        for path in ("/readyz", "/healthz"):
            answers = await asyncio.gather(*(client.get(path) for _ in range(200)))
            answers += [await client.get(path) for _ in range(20)]
            assert {a.status_code for a in answers} <= {200, 503}
        seconds = time.monotonic() - started
        await state.redis.echo(marker)
        await asyncio.wait_for(counter, 10)
    await client.aclose()
    # One check a second per endpoint: the seconds the flood spanned, plus one started in the
    # second before (2 x 2 on a quiet machine, where it takes well under a second).
    assert 1 <= pings <= 2 * (math.ceil(seconds) + 1), (pings, seconds)  # before: 220 each
